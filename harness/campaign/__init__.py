"""Campaigns and batches: plans of units, how they run through an executor, their results."""

"""Results read, compared and rendered: statistics, ab.json, ab.md, ab.png, receipts."""

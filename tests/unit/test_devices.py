"""Device selection: DEVICES, else the caller's visibility variable, else every device found."""

from __future__ import annotations

import pytest

from harness.backends import Device
from harness.executors.devices import select_devices, visible_devices
from harness.settings import spec

FOUND = [Device(0, "a", uuid="GPU-aaa"), Device(1, "b", uuid="GPU-bbb"), Device(2, "c")]


def settings(backend: str = "cuda", **flags: str) -> spec.Settings:
    return spec.resolve({"backend": backend, "runner": "host", **flags}, {},
                        which=lambda _: None)


def never() -> list[Device]:
    raise AssertionError("a selection was given: the device tool must not be asked")


@pytest.mark.parametrize(("flags", "environ", "ids"), [
    ({"devices": "2,0,2"}, {"CUDA_VISIBLE_DEVICES": "1"}, ["2", "0"]),  # DEVICES wins
    ({}, {"CUDA_VISIBLE_DEVICES": " 6, 7,6 "}, ["6", "7"]),
    ({}, {"CUDA_VISIBLE_DEVICES": "GPU-bbb"}, ["GPU-bbb"]),
])
def test_a_given_selection_is_used_in_order_once_each_without_enumerating(flags, environ, ids):
    assert select_devices(settings(**flags), environ, never) == ids


def test_without_a_selection_every_enumerated_device_in_order():
    assert select_devices(settings(), {}, lambda: FOUND) == ["0", "1", "2"]
    assert select_devices(settings(), {}, lambda: []) == []


def test_a_backend_without_an_accelerator_selects_nothing_to_pin():
    assert select_devices(settings("cpu", devices="0,1"), {}, never) is None
    assert visible_devices(FOUND, settings("cpu")) == FOUND


@pytest.mark.parametrize(("flags", "environ", "indices"), [
    ({}, {}, [0, 1, 2]),
    ({"devices": "GPU-bbb,2"}, {}, [1, 2]),  # by UUID or index, in the order found
    ({}, {"CUDA_VISIBLE_DEVICES": "2,GPU-aaa"}, [0, 2]),
    ({"devices": "7"}, {}, []),  # preflight's device check turns this into its failure
])
def test_visible_devices_are_the_found_ones_the_selection_names(flags, environ, indices):
    found = visible_devices(FOUND, settings(**flags), environ)
    assert [d.index for d in found] == indices

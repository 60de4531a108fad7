"""Allocation tracking and snapshots from Python (memarea.set_tracking, tracking, snapshot;
docs/usage.md "Tracking" and "Snapshots")."""

import pytest

import memarea

MiB = 1 << 20


@pytest.fixture
def tracking_on():
    before = memarea.tracking()
    memarea.set_tracking(True)
    yield
    memarea.set_tracking(before)


def _records_of(snap, address):
    """The track records of address in a snapshot: a block's own, or a piece's."""
    found = []
    for dev in snap["devices"]:
        for b in dev["blocks"]:
            base = int(b["address"], 16)
            if base == address and "track" in b:
                found.append((dev["device"], b["track"]))
            for pc in b.get("pieces", []):
                if base + pc["offset"] == address:
                    found.append((dev["device"], pc["track"]))
    return found


def test_on_off_and_bad_arguments():
    before = memarea.tracking()
    memarea.set_tracking(True)
    assert memarea.tracking() is True
    memarea.set_tracking(False)
    assert memarea.tracking() is False
    with pytest.raises(TypeError):
        memarea.set_tracking(1)
    with pytest.raises(memarea.Error) as e:
        memarea.snapshot(memarea.device_count())
    assert e.value.status == memarea.Status.INVALID_DEVICE
    memarea.set_tracking(before)


def test_an_area_allocation_has_a_record_until_freed(need_device, tracking_on):
    buf = memarea.Area(0).alloc(3 * MiB + 5)
    snap = memarea.snapshot()
    assert snap["tracking"] is True
    recs = _records_of(snap, buf.ptr)
    assert len(recs) == 1
    device, track = recs[0]
    assert device == 0 and track["size"] == 3 * MiB + 5 and track["stack"]
    one = memarea.snapshot(0)
    assert [d["device"] for d in one["devices"]] == [0]
    assert len(_records_of(one, buf.ptr)) == 1
    ptr = buf.ptr
    buf.free()
    assert _records_of(memarea.snapshot(), ptr) == []


def test_a_pool_piece_sits_inside_its_block(need_device, tracking_on):
    with memarea.Pool(memarea.Area(0)) as pool:
        piece = pool.alloc(1000)
        recs = _records_of(memarea.snapshot(0), piece.ptr)
        assert len(recs) == 1 and recs[0][1]["size"] == 1000
        ptr = piece.ptr
        piece.free()
        assert _records_of(memarea.snapshot(0), ptr) == []


def test_off_keeps_no_record(need_device):
    before = memarea.tracking()
    memarea.set_tracking(False)
    buf = memarea.Area(0).alloc(MiB)
    try:
        snap = memarea.snapshot()
        assert snap["tracking"] is False and snap["tracked_records"] == 0
        assert _records_of(snap, buf.ptr) == []
    finally:
        buf.free()
        memarea.set_tracking(before)


_DEPTH_PROBE = """
import memarea
buf = memarea.Area(0).alloc(1 << 20)
snap = memarea.snapshot(0)
for dev in snap["devices"]:
    for b in dev["blocks"]:
        if int(b["address"], 16) == buf.ptr:
            print(len(b["track"]["stack"]), snap["stack_depth"], snap["stack_walker"])
buf.free()
"""


@pytest.mark.parametrize("depth, asked, warned", [("3", 3, False), ("20", 20, False),
                                                  ("0", None, True), ("many", None, True),
                                                  ("", None, False)])
def test_track_depth_from_the_environment(need_device, depth, asked, warned):
    import os
    import subprocess
    import sys
    env = dict(os.environ, MEMAREA_TRACK="1", MEMAREA_TRACK_DEPTH=depth)
    r = subprocess.run([sys.executable, "-c", _DEPTH_PROBE], env=env, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    frames, kept, walker = r.stdout.split()
    # The default is the walker's: 16 with libunwind, 8 with glibc's backtrace() (24 in a
    # build with a sanitizer, which always takes glibc's).
    if asked:
        assert int(kept) == asked
    else:
        assert (walker, int(kept)) in {("libunwind", 16), ("backtrace", 8), ("backtrace", 24)}
    expected = int(kept)
    # Python's interpreter is deep: a stack fills whatever depth it is given.
    assert int(frames) == expected, (frames, r.stderr)
    assert ("MEMAREA_TRACK_DEPTH" in r.stderr) == warned, r.stderr


def test_a_snapshot_of_frames_whose_object_path_is_not_utf8(need_device, tmp_path):
    """A program whose path is not UTF-8 (its frames name it) still gets its snapshot, the bad
    bytes replaced."""
    import os
    import shutil
    import subprocess
    import sys
    real = os.path.realpath(sys.executable)
    where = os.path.join(os.fsencode(str(tmp_path)), b"bin\xff")
    os.mkdir(where)
    exe = os.path.join(where, b"python3")
    shutil.copy2(os.fsencode(real), exe)
    env = dict(os.environ, MEMAREA_TRACK="1", MEMAREA_TRACK_DEPTH="32",
               PYTHONHOME=sys.base_prefix)
    # Where the interpreter came from a virtual environment, its packages stay reachable.
    env["PYTHONPATH"] = os.pathsep.join(p for p in [env.get("PYTHONPATH", "")] + sys.path if p)
    probe = ("import memarea\n"
             "buf = memarea.Area(0).alloc(1 << 20)\n"
             "snap = memarea.snapshot(0)\n"
             "frames = [f for d in snap['devices'] for b in d['blocks'] if 'track' in b\n"
             "          for f in b['track']['stack']]\n"
             "print(any('bin\\ufffd' in f for f in frames))\n"
             "buf.free()\n")
    r = subprocess.run([exe, "-c", probe], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split()[-1] == "True", (r.stdout, r.stderr)

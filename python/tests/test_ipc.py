"""IPC between Python processes: handles, pickled Buffers through multiprocessing (spawn and
forkserver) and concurrent.futures, lifetimes, bad handles."""

import concurrent.futures
import hashlib
import multiprocessing
import pickle

import numpy as np
import pytest

import ipc_workers
import memarea
from conftest import call, random_bytes

METHODS = [m for m in ("spawn", "forkserver") if m in multiprocessing.get_all_start_methods()]


@pytest.fixture
def need_ipc(need_device):
    if not memarea.device_properties(0)["ipc"]:
        pytest.skip("device 0 has no IPC")


@pytest.fixture(scope="module", params=METHODS)
def pool(request):
    ctx = multiprocessing.get_context(request.param)
    with ctx.Pool(1) as p:
        yield p


def test_pickled_buffer_is_read_by_another_process(need_ipc, pool, no_leak):
    buf = memarea.Area(0).alloc(1 << 20)
    data = random_bytes(1 << 20)
    memarea.copy(buf, data)
    kind, nbytes, got = call(pool, ipc_workers.read, (buf,))
    assert kind == "ipc" and nbytes == 1 << 20
    assert got == data.tobytes()
    buf.free()


def test_other_process_writes_we_read(need_ipc, pool, no_leak):
    buf = memarea.Area(0).alloc(123457)
    memarea.copy(buf, random_bytes(123457))
    digest = call(pool, ipc_workers.write, (buf, 1234))
    assert hashlib.sha256(buf.tobytes()).hexdigest() == digest
    expect = np.random.default_rng(1234).integers(0, 256, 123457, dtype=np.uint8)
    assert buf.tobytes() == expect.tobytes()
    buf.free()


def test_pickled_view_and_pool_piece(need_ipc, pool, no_leak):
    with memarea.Pool(memarea.Area(0)) as mpool:
        buf = mpool.alloc(4096)
        data = np.random.default_rng().standard_normal(1024).astype(np.float32)
        memarea.copy(buf, data)
        got = call(pool, ipc_workers.read_view, (buf.view("float32", (4, 256)),))
        assert np.array_equal(got, data.reshape(4, 256))
        buf.free()


def test_open_of_a_pool_piece_gives_exactly_the_exported_bytes(need_ipc, pool, no_leak):
    # Another process exports a 1 KiB piece of a pool block (2 MiB or more) between two
    # neighbours; opened without nbytes, the Buffer covers that piece and nothing else.
    h, data = call(pool, ipc_workers.export_pool_piece, (1024, 4321))
    try:
        with memarea.ipc.open(h) as buf:
            assert buf.kind == "ipc" and buf.nbytes == 1024
            assert buf.tobytes() == data
            info = memarea.lookup(buf)
            assert (info.base, info.size, info.capacity) == (buf.ptr, 1024, 1024)
            assert info.kind == "ipc" and info.device == 0
            with pytest.raises(ValueError, match="exceeds"):
                memarea.ipc.open(h, 1025)
    finally:
        call(pool, ipc_workers.release_exports, ())


def test_raw_handle(need_ipc, pool, no_leak):
    buf = memarea.Area(0).alloc(1 << 16)
    data = random_bytes(1 << 16)
    memarea.copy(buf, data)
    h = buf.ipc_handle()
    assert isinstance(h, bytes) and len(h) == memarea.ipc.HANDLE_SIZE
    assert memarea.ipc.handle(buf) == h
    assert pickle.loads(pickle.dumps(h)) == h
    assert call(pool, ipc_workers.open_handle, (h, 1 << 16)) == data.tobytes()
    buf.free()


def test_concurrent_futures(need_ipc, no_leak):
    bufs = [memarea.Area(0).alloc(4096 * (i + 1)) for i in range(3)]
    datas = [random_bytes(b.nbytes) for b in bufs]
    for b, d in zip(bufs, datas):
        memarea.copy(b, d)
    ctx = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(2, mp_context=ctx) as ex:
        results = list(ex.map(ipc_workers.read, bufs))
    for (kind, n, got), d in zip(results, datas):
        assert kind == "ipc" and got == d.tobytes()
    del bufs


def test_free_while_open_elsewhere_is_deferred(need_ipc, no_leak):
    ctx = multiprocessing.get_context("spawn")
    mgr = ctx.Manager()
    opened, release = mgr.Event(), mgr.Event()
    buf = memarea.Area(0).alloc(1 << 16)
    data = random_bytes(1 << 16)
    memarea.copy(buf, data)
    with ctx.Pool(1) as p:
        r = p.apply_async(ipc_workers.hold_then_read, (buf, opened, release))
        assert opened.wait(60)
        buf.free()  # the importer still has it open: memarea defers the free
        release.set()
        assert r.get(60) == data.tobytes()
    mgr.shutdown()


def test_bad_handles(need_ipc, pool, no_leak):
    with pytest.raises(ValueError, match="128"):
        memarea.ipc.open(b"short")
    with pytest.raises(TypeError):
        memarea.ipc.open("0" * 128)
    with pytest.raises(memarea.Error) as e:
        memarea.ipc.open(bytes(range(128)))
    assert e.value.status == memarea.Status.INVALID_HANDLE
    # A handle of freed memory is stale, in another process too.
    buf = memarea.Area(0).alloc(4096)
    h = buf.ipc_handle()
    buf.free()
    with pytest.raises(memarea.Error) as e:
        call(pool, ipc_workers.fail_open, (h,))
    assert e.value.status == memarea.Status.INVALID_HANDLE
    # Host memory has no IPC handle: NOT_SUPPORTED, also when pickled.
    host = memarea.Area(0, "host").alloc(64)
    with pytest.raises(memarea.Error) as e:
        host.ipc_handle()
    assert e.value.status == memarea.Status.NOT_SUPPORTED
    with pytest.raises(memarea.Error):
        pickle.dumps(host)
    del host
    assert memarea.ipc.remove_stale_objects() >= 0

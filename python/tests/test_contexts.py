"""Contexts the user makes from Python (memarea.Context; docs/contexts.md). Each test runs its
body on a fresh thread, whose context stack starts empty on every backend."""

import threading

import pytest

import memarea

S = memarea.Status


def on_fresh_thread(body):
    failure = []

    def run():
        try:
            body()
        except BaseException as e:  # noqa: BLE001 - handed to the test's thread
            failure.append(e)

    t = threading.Thread(target=run)
    t.start()
    t.join()
    if failure:
        raise failure[0]


def status_of(call):
    with pytest.raises(memarea.Error) as e:
        call()
    return e.value.status


@pytest.fixture
def contexts(need_device):
    probe = []

    def make():
        try:
            memarea.Context.create(0).destroy()
        except memarea.Error as e:
            probe.append(e)

    on_fresh_thread(make)
    if probe and probe[0].status == S.NOT_SUPPORTED:
        pytest.skip(f"no user contexts on {memarea.backend()}: {probe[0]}")
    assert not probe, probe


def test_the_stack_create_push_pop_and_queries(contexts, ndev):
    def body():
        assert memarea.Context.current() is None
        assert status_of(memarea.Context.pop) == S.INVALID_CONTEXT
        a = memarea.Context.create(0, memarea.Context.SCHED_YIELD)
        b = memarea.Context.create(ndev - 1)
        assert a.owns and b.owns
        assert memarea.Context.current() == b
        assert a.device == 0 and b.device == ndev - 1
        assert a.flags & memarea.Context.SCHED_YIELD
        assert memarea.Context.pop() == b
        assert memarea.Context.current() == a
        b.set_current()  # replaces a on top
        assert memarea.Context.current() == b
        memarea.Context.clear_current()
        assert memarea.Context.current() is None
        with a:
            assert memarea.Context.current() == a
            a.synchronize()
        assert memarea.Context.current() is None
        w = memarea.Context.wrap(a.handle)
        assert not w.owns and w == a and w.device == 0
        b.destroy()
        a.destroy()

    on_fresh_thread(body)


def test_a_destroyed_context_is_invalid_everywhere(contexts):
    def body():
        keep = memarea.Context.create(0)
        gone = memarea.Context.create(0)
        handle = gone.handle
        memarea.Context.pop()
        gone.destroy()
        assert memarea.Context.current() == keep
        with pytest.raises(ValueError):
            gone.device
        w = memarea.Context(handle)  # the raw handle, as a program holding it would
        for call in (lambda: w.device, lambda: w.flags, w.synchronize, w.push, w.set_current,
                     w.destroy):
            assert status_of(call) == S.INVALID_CONTEXT
        w = memarea.Context(handle)
        for call in (w.enable_peer_access, w.disable_peer_access,
                     lambda: memarea.Context.wrap(handle)):
            assert status_of(call) == S.INVALID_CONTEXT
        assert memarea.Context.current() == keep, "failed calls left the stack alone"
        keep.destroy()

    on_fresh_thread(body)


def test_an_owner_collected_destroys_its_context(contexts):
    def body():
        c = memarea.Context.create(0)
        handle = c.handle
        memarea.Context.pop()
        del c
        assert status_of(lambda: memarea.Context.wrap(handle)) == S.INVALID_CONTEXT

    on_fresh_thread(body)


def test_peer_access_statuses(contexts):
    def body():
        a = memarea.Context.create(0)
        memarea.Context.pop()
        # No context current.
        assert status_of(a.enable_peer_access) == S.INVALID_CONTEXT
        assert status_of(a.disable_peer_access) == S.INVALID_CONTEXT
        # The current context itself.
        with a:
            assert status_of(a.enable_peer_access) == S.INVALID_CONTEXT
            # Two contexts of one device: a device is not its own peer.
            same = memarea.Context.create(0)
            assert status_of(a.enable_peer_access) == S.PEER_ACCESS_UNSUPPORTED
            assert status_of(a.disable_peer_access) == S.PEER_ACCESS_NOT_ENABLED
            same.destroy()
        a.destroy()

    on_fresh_thread(body)


def test_peer_access_between_two_devices(contexts, need_two):
    if not memarea.can_access_peer(0, 1):
        pytest.skip("devices 0 and 1 cannot reach each other")

    def body():
        one = memarea.Context.create(1)
        memarea.Context.pop()
        with memarea.Context.create(0) as zero:
            assert status_of(lambda: one.enable_peer_access(1)) == S.INVALID_VALUE
            one.enable_peer_access()
            assert status_of(one.enable_peer_access) == S.PEER_ACCESS_ALREADY_ENABLED
            one.disable_peer_access()
            assert status_of(one.disable_peer_access) == S.PEER_ACCESS_NOT_ENABLED
        zero.destroy()
        one.destroy()

    on_fresh_thread(body)


def test_bad_arguments(contexts, ndev):
    with pytest.raises(TypeError):
        memarea.Context.create(True)
    with pytest.raises(TypeError):
        memarea.Context.create(0, -1)
    with pytest.raises(TypeError):
        memarea.Context.wrap("0x1")
    with pytest.raises(ValueError):
        memarea.Context.wrap(-1)

    def body():
        assert status_of(lambda: memarea.Context.create(0, 0x1 | 0x2)) == S.INVALID_VALUE
        assert status_of(lambda: memarea.Context.create(0, 0x100)) == S.INVALID_VALUE
        assert status_of(lambda: memarea.Context.create(ndev)) == S.INVALID_DEVICE
        assert memarea.Context.current() is None

    on_fresh_thread(body)

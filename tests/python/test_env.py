"""flexattn._env.env_flag: the Python side's switches parse as the runtime's (src/jit/sys.cc env_flag)."""
import pytest

from flexattn._env import env_flag


@pytest.mark.parametrize("value", ["1", "true", "YES", "On"])
def test_on_spellings(monkeypatch, value):
    monkeypatch.setenv("FLEXATTN_TEST_SWITCH", value)
    assert env_flag("FLEXATTN_TEST_SWITCH", False) is True


@pytest.mark.parametrize("value", ["0", "false", "No", "OFF"])
def test_off_spellings(monkeypatch, value):
    monkeypatch.setenv("FLEXATTN_TEST_SWITCH", value)
    assert env_flag("FLEXATTN_TEST_SWITCH", True) is False


@pytest.mark.parametrize("value", [None, "", "auto", "2"])
@pytest.mark.parametrize("default", [True, False])
def test_unset_or_unknown_is_the_default(monkeypatch, value, default):
    if value is None:
        monkeypatch.delenv("FLEXATTN_TEST_SWITCH", raising=False)
    else:
        monkeypatch.setenv("FLEXATTN_TEST_SWITCH", value)
    assert env_flag("FLEXATTN_TEST_SWITCH", default) is default

"""Environment switches read on the Python side, parsed as the runtime parses its own (src/jit/sys.cc env_flag):
1 / true / yes / on and 0 / false / no / off in any case; anything else, or unset, is the default."""
import os

_ON = ("1", "true", "yes", "on")
_OFF = ("0", "false", "no", "off")


def env_flag(name: str, default: bool) -> bool:
    v = os.environ.get(name, "").lower()
    if v in _ON:
        return True
    if v in _OFF:
        return False
    return default

"""Graph breaks told to the user, as ``torch.compile`` reports them: where a trace aborts and the
call runs eagerly instead, a ``CompileWarning`` names the compiled function, the reason (which
names the op or the read) and the user's source line, once per function and line.

``Tracer.abort`` notes the site of a trace's first abort (``note_site``): the innermost frame
outside the library's own layers (``dispatch_jit/tools`` counts as user code: the GPT of
tools/gpt.py is written as a user writes it).  The compiled function (api.py) and a whole step's
entry (training/whole_step.py) call ``Breaks.tell`` when a signature or a step variant ends up
eager.  What runs eagerly by design is not a break: a whole step's first call, whose optimizer
makes its state (``BY_DESIGN``)."""

from __future__ import annotations

import linecache
import os
import sys
import threading
import warnings

from dispatch_jit.errors import CompileWarning

__all__ = ["Breaks", "note_site", "take_site", "BY_DESIGN"]

_PKG = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_ROOTS = tuple({_PKG + os.sep, os.path.realpath(_PKG) + os.sep,
                os.path.realpath(os.path.join(_PKG, "kernels")) + os.sep})
_USER = tuple(os.path.join(r, "tools") + os.sep for r in _ROOTS)
# reasons of calls that run eagerly as designed: no break to report
BY_DESIGN = ("first step creates its state",)


class _Site(threading.local):
    site = None


_last = _Site()
_library: dict[str, bool] = {}


def _in_library(filename: str) -> bool:
    lib = _library.get(filename)
    if lib is None:
        lib = filename.startswith("<dispatch_jit") or (
            filename.startswith(_ROOTS) and not filename.startswith(_USER))
        _library[filename] = lib
    return lib


def note_site() -> None:
    """Remember the user's line that made the running trace abort (its innermost frame outside
    the library)."""
    f = sys._getframe(1)
    while f is not None and _in_library(f.f_code.co_filename):
        f = f.f_back
    _last.site = None if f is None else (f.f_code.co_filename, f.f_lineno)


def take_site():
    """The site ``note_site`` remembered in this thread (then forgotten), or None."""
    site, _last.site = _last.site, None
    return site


class Breaks:
    """The breaks a compiled function has told (``owner.__name__`` names it)."""

    def __init__(self, owner):
        self.owner = owner
        self.told: set = set()

    def tell(self, reason: str, site) -> None:
        key = reason if site is None else site
        if any(r in reason for r in BY_DESIGN) or key in self.told:
            return
        self.told.add(key)
        where = ""
        if site is not None:
            code = linecache.getline(site[0], site[1]).strip()
            where = f"\n  at {site[0]}:{site[1]}" + (f": {code}" if code else "")
        msg = (f"{self.owner.__name__}: graph break, the call runs eagerly: {reason}{where}\n"
               f"(told once per function and site; explain() lists every break)")
        if site is not None:
            warnings.warn_explicit(msg, CompileWarning, site[0], site[1])
        else:
            warnings.warn(msg, CompileWarning, stacklevel=4)

"""The disk cache's trust checks (dispatch_jit/jit/trust.py), tried as an attacker would.

An entry is a pickle: loading it runs code.  The attacks: a forged entry whose check line is
recomputed, planted by a second process; a cache directory (or a directory above it) that
another user can write or owns; an entry another user owns or can write; a symlink out of the
root, for the ``cpu/`` subdirectory or for an entry; a key file others can read.  Each must
end in the right values, nothing unpickled from the planted bytes, and, where someone else
could have written the path, one warning naming it and the fix.

The tests run as root, so "another user" is a file or directory chowned to an unused uid, or
made group- or other-writable.  In-process cases compile one tiny loop (test_diskcache_faults'
source) into per-test directories; the store is checked once per process and directory, so a
case that changes a checked directory works on a fresh copy of it.
"""

import json
import os
import shutil
import stat
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest

from dispatch_jit.jit import diskcache, trust

from test_diskcache_faults import ARR, _GLB, _OPTS, _src

STRANGER = 4242            # a uid and gid no account here has

pytestmark = pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0,
                                reason="simulates other users with chown, which needs root")


@pytest.fixture
def cache(tmp_path, monkeypatch):
    root = tmp_path / "cache"
    monkeypatch.setenv("DISPATCH_JIT_CACHE_DIR", str(root))
    monkeypatch.setenv("DISPATCH_JIT_CACHE_KEY_FILE", str(tmp_path / "config" / "cache.key"))
    return root


def _compile(tag: int = 40):
    """(how the loop came, the disk cache's warnings), checking the values."""
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        ep, how = diskcache.compile_cached(_src(tag), "fused_fault", (ARR, ARR), _OPTS, _GLB)
    out = np.empty(4)
    ep(np.arange(4.0), out)
    assert out.tolist() == (np.arange(4.0) * (tag + 0.5) + 0.25).tolist()
    return how, [str(x.message) for x in w if "disk cache" in str(x.message)]


def _entries(root):
    return sorted((root / "cpu").glob("*.nbx"))


def _genuine(root, tag: int = 40):
    """``root`` holding a valid entry of loop ``tag``, made by this user; a fresh copy of it is
    a directory this process has not checked yet."""
    assert _compile(tag) == ("compiled", [])
    assert _compile(tag) == ("disk", [])
    return _entries(root)


def _use(monkeypatch, root):
    monkeypatch.setenv("DISPATCH_JIT_CACHE_DIR", str(root))


# --- modes of what the cache creates ---------------------------------------------------------------

@pytest.mark.parametrize("umask, entry_mode", [(0o077, 0o600), (0o022, 0o644), (0o002, 0o644)])
def test_directories_are_0700_and_entries_follow_the_umask(cache, tmp_path, monkeypatch, umask, entry_mode):
    root = tmp_path / "new" / "cache"             # missing parents are made too
    _use(monkeypatch, root)
    old = os.umask(umask)
    try:
        assert _compile() == ("compiled", [])
    finally:
        os.umask(old)
    for d in (tmp_path / "new", root, root / "cpu", tmp_path / "config"):
        assert stat.S_IMODE(os.stat(d).st_mode) == 0o700, d
    (entry,) = _entries(root)
    assert stat.S_IMODE(entry.stat().st_mode) == entry_mode
    key = tmp_path / "config" / "cache.key"
    assert stat.S_IMODE(key.stat().st_mode) == 0o600 and len(key.read_bytes()) == trust.KEY_BYTES
    assert _compile() == ("disk", [])


# --- directories someone else could write ------------------------------------------------------------

DIRECTORY_ATTACKS = {
    "writable by every user": lambda d: os.chmod(d, 0o777),
    "writable by others only": lambda d: os.chmod(d, 0o703),
    "writable by a shared group": lambda d: (os.chown(d, -1, STRANGER), os.chmod(d, 0o770)),
    "owned by another user": lambda d: os.chown(d, STRANGER, -1),
    "cpu/ writable by every user": lambda d: os.chmod(d / "cpu", 0o777),
    "cpu/ owned by another user": lambda d: os.chown(d / "cpu", STRANGER, -1),
}


@pytest.mark.parametrize("attack", list(DIRECTORY_ATTACKS))
def test_a_directory_someone_else_can_write_is_not_loaded_from(cache, tmp_path, monkeypatch, attack):
    _genuine(cache)
    shared = tmp_path / "shared"
    shutil.copytree(cache, shared)
    DIRECTORY_ATTACKS[attack](shared)
    before = {p: p.read_bytes() for p in _entries(shared)}
    _use(monkeypatch, shared)
    how, warned = _compile()
    assert how == "compiled"
    assert len(warned) == 1, warned
    bad = shared / "cpu" if attack.startswith("cpu/") else shared
    assert f"not using {bad}" in warned[0] and "in memory" in warned[0]
    assert ("chmod go-w" in warned[0]) if "writable" in attack else ("a directory of your own" in warned[0])
    assert _compile(41) == ("compiled", [])          # said once; nothing written there either
    assert {p: p.read_bytes() for p in _entries(shared)} == before


def test_a_group_writable_directory_of_the_users_private_group_is_trusted(cache, tmp_path, monkeypatch):
    """Debian-style user private groups: under umask 002 every directory is group-writable."""
    if not trust._private_group(os.getegid(), os.geteuid()):
        pytest.skip("this user's group has other members")
    _genuine(cache)
    mine = tmp_path / "mine"
    shutil.copytree(cache, mine)
    os.chmod(mine, 0o770)
    _use(monkeypatch, mine)
    assert _compile() == ("disk", [])


@pytest.mark.parametrize("parent_mode, parent_owner, trusted", [
    (0o777, 0, False),              # anyone may rename the cache away and put their own in its place
    (0o1777, 0, True),              # sticky, as /tmp: others cannot rename what is ours
    (0o755, STRANGER, False),       # its owner can
])
def test_the_directories_above_the_cache(cache, tmp_path, monkeypatch, parent_mode, parent_owner, trusted):
    _genuine(cache)
    parent = tmp_path / "parent"
    shutil.copytree(cache, parent / "cache")
    os.chown(parent, parent_owner, -1)
    os.chmod(parent, parent_mode)
    _use(monkeypatch, parent / "cache")
    how, warned = _compile()
    if trusted:
        assert (how, warned) == ("disk", [])
    else:
        assert how == "compiled" and len(warned) == 1 and f"not using {parent}:" in warned[0]


def test_a_symlinked_cpu_directory_is_not_followed(cache, tmp_path, monkeypatch):
    _genuine(cache)
    victim = tmp_path / "victim"
    victim.mkdir(mode=0o700)
    (victim / "cpu").symlink_to(cache / "cpu")     # valid entries, out of the root
    _use(monkeypatch, victim)
    how, warned = _compile()
    assert how == "compiled"
    assert len(warned) == 1 and "symlink" in warned[0] and f"rm {victim / 'cpu'}" in warned[0]


def test_a_symlinked_cache_directory_is_resolved_once_and_checked_where_it_leads(cache, tmp_path, monkeypatch):
    _genuine(cache)
    link = tmp_path / "link"
    link.symlink_to(cache)
    _use(monkeypatch, link)
    assert _compile() == ("disk", [])
    os.chmod(cache, 0o777)
    link2 = tmp_path / "link2"
    link2.symlink_to(cache)
    _use(monkeypatch, link2)
    how, warned = _compile()
    assert how == "compiled" and f"not using {cache}:" in warned[0]


# --- entries someone else could have written ---------------------------------------------------------

def _outside(entry, tmp_path):
    """Move the entry out of the root, a symlink left in its place."""
    out = tmp_path / "elsewhere.nbx"
    shutil.move(entry, out)
    entry.symlink_to(out)


ENTRY_ATTACKS = {
    "owned by another user": lambda e, t: os.chown(e, STRANGER, -1),
    "writable by every user": lambda e, t: os.chmod(e, 0o666),
    "writable by its group": lambda e, t: os.chmod(e, 0o664),
    "a symlink out of the root": _outside,
}


@pytest.mark.parametrize("attack", list(ENTRY_ATTACKS))
def test_an_entry_someone_else_could_have_written_is_not_loaded(cache, tmp_path, monkeypatch, attack):
    (entry,) = _genuine(cache)
    ENTRY_ATTACKS[attack](entry, tmp_path)
    how, warned = _compile()
    assert how == "compiled"
    assert len(warned) == 1 and f"not loading {entry}" in warned[0] and str(entry) in warned[0].split("To fix")[1]
    # replaced by the kernel compiled instead: a regular file of this user's, loaded next time
    st = os.lstat(entry)
    assert stat.S_ISREG(st.st_mode) and st.st_uid == os.geteuid() and not st.st_mode & 0o022
    assert _compile() == ("disk", [])


# --- forged entries, planted by another process ------------------------------------------------------

# Knows the format from the source, not the key: swaps the payload of every entry for a pickle that
# writes a marker file when loaded, and recomputes the check line (SHA-256, as format v3 had it, or an
# HMAC under a key of its own).
ATTACKER = textwrap.dedent("""
    import hashlib, hmac, json, os, pickle, sys
    from pathlib import Path

    cpu, marker, how = Path(sys.argv[1]), sys.argv[2], sys.argv[3]

    class Payload:
        def __reduce__(self):
            return (open, (marker, "w"))

    for path in sorted(cpu.glob("*.nbx")):
        magic, _, body = path.read_bytes().split(b"\\n", 2)
        header, _, _ = body.partition(b"\\n")
        payload = pickle.dumps(Payload())
        meta = json.loads(header)
        meta["size"] = len(payload)
        body = json.dumps(meta).encode() + b"\\n" + payload
        check = (hashlib.sha256(body).hexdigest() if how == "sha256" else
                 hmac.new(os.urandom(32), body, hashlib.sha256).hexdigest())
        path.write_bytes(magic + b"\\n" + check.encode() + b"\\n" + body)
        print(path)
""")


def _attack(cpu, marker, how):
    p = subprocess.run([sys.executable, "-c", ATTACKER, str(cpu), str(marker), how],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    return p.stdout.split()


@pytest.mark.parametrize("how", ["sha256", "hmac under its own key"])
def test_a_forged_entry_is_never_unpickled(cache, tmp_path, monkeypatch, how):
    _genuine(cache)
    marker = tmp_path / "pwned"
    assert len(_attack(cache / "cpu", marker, how)) == 1
    assert _compile() == ("compiled", [])            # right values; a quiet miss, as a damaged entry
    assert not marker.exists()
    assert _compile() == ("disk", [])                # rewritten with this user's key


VICTIM = textwrap.dedent("""
    import json, warnings
    import numpy as np
    import dispatch_jit as dj
    from dispatch_jit.jit import cache
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        y = (dj.tensor(np.arange(4.0)) + dj.tensor(np.arange(4.0))).numpy().tolist()
    print(json.dumps({"y": y, "totals": cache.totals(), "warnings": [str(m.message) for m in w]}))
""")


def test_x_plus_x_in_a_fresh_process_after_an_attack(tmp_path):
    """The issue's scenario end to end: a warm cache, every entry forged by another process,
    then the victim's ``x + x`` in a fresh process; and the same with the directory (and the
    forgeries) another user's to write."""
    env = dict(os.environ, DISPATCH_JIT_CACHE_KEY_FILE=str(tmp_path / "config" / "cache.key"))

    def victim(root):
        p = subprocess.run([sys.executable, "-c", VICTIM], env=dict(env, DISPATCH_JIT_CACHE_DIR=str(root)),
                           capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, p.stderr
        return json.loads(p.stdout.strip().splitlines()[-1])

    cold = victim(tmp_path / "cache")
    assert cold["y"] == [0.0, 2.0, 4.0, 6.0] and cold["totals"]["compiled"] >= 1 and not cold["warnings"]
    shared = tmp_path / "shared"
    shutil.copytree(tmp_path / "cache", shared)
    marker = tmp_path / "pwned"
    assert _attack(tmp_path / "cache" / "cpu", marker, "sha256")
    forged = _attack(shared / "cpu", marker, "sha256")
    os.chmod(shared, 0o777)
    for path in forged:
        os.chown(path, STRANGER, STRANGER)

    for root in (tmp_path / "cache", shared):
        hit = victim(root)
        assert hit["y"] == [0.0, 2.0, 4.0, 6.0]
        assert not marker.exists()
        assert hit["totals"]["disk"] == 0 and hit["totals"]["compiled"] == cold["totals"]["compiled"]
    assert len(hit["warnings"]) == 1 and f"not using {shared}: every user may write it" in hit["warnings"][0]


# --- the key ---------------------------------------------------------------------------------------------

def _own_key(key):
    key.parent.mkdir(mode=0o700, exist_ok=True)
    key.write_bytes(os.urandom(trust.KEY_BYTES))
    key.chmod(0o600)


def _key_behind_link(key):
    elsewhere = key.parent.parent / "open"
    elsewhere.mkdir()
    elsewhere.chmod(0o777)
    key.rename(elsewhere / "cache.key")
    key.symlink_to(elsewhere / "cache.key")


KEY_ATTACKS = {
    "readable by others": (lambda k: k.chmod(0o644), "chmod 600"),
    "owned by another user": (lambda k: os.chown(k, STRANGER, -1), "delete it"),
    # a symlinked key file is resolved, and what it leads to is checked
    "a symlink to a key in a directory others can write": (lambda k: _key_behind_link(k), "chmod go-w"),
    "not a key": (lambda k: k.write_bytes(b"short"), "delete it"),
    "in a directory others can write": (lambda k: k.parent.chmod(0o777), "chmod go-w"),
}


@pytest.mark.parametrize("attack", list(KEY_ATTACKS))
def test_a_key_file_others_could_read_or_write_is_refused(cache, tmp_path, monkeypatch, attack):
    _genuine(cache)
    key = tmp_path / "config2" / "cache.key"
    _own_key(key)
    damage, fix = KEY_ATTACKS[attack]
    damage(key)
    monkeypatch.setenv("DISPATCH_JIT_CACHE_KEY_FILE", str(key))
    how, warned = _compile()
    assert how == "compiled" and len(warned) == 1, warned
    assert "key file" in warned[0] and fix in warned[0]


def test_the_key_never_lives_in_the_cache_directory(cache, monkeypatch):
    monkeypatch.setenv("DISPATCH_JIT_CACHE_KEY_FILE", str(cache / "cache.key"))
    how, warned = _compile()
    assert how == "compiled" and len(warned) == 1 and "inside the cache directory" in warned[0]
    assert not (cache / "cache.key").exists()


def test_a_new_key_makes_old_entries_quiet_misses(cache, tmp_path, monkeypatch):
    _genuine(cache)
    monkeypatch.setenv("DISPATCH_JIT_CACHE_KEY_FILE", str(tmp_path / "fresh" / "cache.key"))
    assert _compile() == ("compiled", [])
    assert _compile() == ("disk", [])


def test_two_processes_making_the_key_agree_on_one(tmp_path):
    path = str(tmp_path / "cache.key")
    trust._new_key(path)
    first = open(path, "rb").read()
    trust._new_key(path)                      # the second to come finds it made: keeps the first
    assert open(path, "rb").read() == first and len(first) == trust.KEY_BYTES
    assert os.listdir(tmp_path) == ["cache.key"]


def test_the_directory_is_checked_once_per_process(cache, monkeypatch):
    calls = []
    real = trust._check
    monkeypatch.setattr(trust, "_check", lambda *a: calls.append(a) or real(*a))
    assert _compile(42)[0] == "compiled"
    assert _compile(42)[0] == "disk"
    assert _compile(43)[0] == "compiled"
    assert len(calls) == 1

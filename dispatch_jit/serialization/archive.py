"""The zip archive under ``dj.load``, read as untrusted input.

A file is checked before any member is inflated, so that no member can cost more memory than
the bytes it occupies in the file justify:

1. It must be a regular file (a FIFO blocks, ``/dev/zero`` never ends), or a seekable file object.
2. Member names must be unique (a reader that picks the first and one that picks the last would
   see two different files), and members must not overlap (the central directory may point many
   names at one compressed blob: the overlapping zip bomb).
3. A member is stored or deflated (bzip2 and lzma reach ratios no check could bound), not
   encrypted, and declares no more bytes than deflate can produce from its compressed size.
4. A member is read once, into a buffer of exactly the size the file's own index declares for it
   (``dj.save``'s pickle for a storage, the ``.npy`` header for the first format), and refused
   when its zip header says otherwise: inflating stops at that size.
"""

from __future__ import annotations

import os
import stat
import struct
import zipfile
import zlib

import numpy as np

from ..dtypes import BY_NP
from ..errors import ArgumentTypeError, LoadError

__all__ = ["Archive", "open_for_reading"]

# Deflate emits at most one 258-byte match per two bits (RFC 1951), so no deflated member can
# inflate to more than 1032 times its compressed size; one that declares more is forged.
DEFLATE_MAX_RATIO = 1032
_CHUNK = 1 << 20
# what zipfile raises on a damaged archive ("zip file version 22.9" and "strong encryption" are
# NotImplementedErrors, a bad deflate stream a zlib.error)
_DAMAGED = (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, OSError, ValueError, NotImplementedError,
            zlib.error, struct.error)
_LOCAL_HEADER = struct.Struct("<4s22xHH")       # signature, ..., file name length, extra field length
_KINDS = ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a directory"))


def _kind(mode: int) -> str:
    return next((what for test, what in _KINDS if test(mode)), "not a regular file")


class open_for_reading:
    """A path opened for reading (and closed after), or a file object used as it is, once it
    is known to be a regular file: opening does not block on a FIFO (O_NONBLOCK) and nothing is
    read before the check."""

    def __init__(self, f):
        self.f, self.owned = f, isinstance(f, (str, os.PathLike))
        self.name = repr(os.fspath(f)) if self.owned else "the file object"

    def __enter__(self):
        if not self.owned:
            self._check_file_object()
            return self.f
        flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
        fd = os.open(self.f, flags)
        try:
            self._check_regular(os.fstat(fd).st_mode)
        except BaseException:
            os.close(fd)
            raise
        self.fh = os.fdopen(fd, "rb")
        return self.fh

    def __exit__(self, *exc):
        if self.owned:
            self.fh.close()

    def _check_regular(self, mode: int) -> None:
        if not stat.S_ISREG(mode):
            raise LoadError(f"load: {self.name} is {_kind(mode)}, not a regular file; dj.load reads only "
                            f"regular files (copy the data into one, or into io.BytesIO, first)")

    def _check_file_object(self) -> None:
        f = self.f
        if not callable(getattr(f, "read", None)):
            raise ArgumentTypeError(f"load: expected a path or a binary file object, got {type(f).__name__}")
        try:
            fd = f.fileno()
        except (AttributeError, OSError, ValueError):      # io.BytesIO and friends have no descriptor
            fd = None
        if fd is not None:
            self._check_regular(os.fstat(fd).st_mode)
        seekable = getattr(f, "seekable", None)
        if seekable is not None and not seekable():
            raise LoadError("load: the file object is not seekable (a zip archive is read from its end); "
                            "read it into io.BytesIO first")


class Archive:
    """The members of a zip archive that passed the checks of the module docstring."""

    def __init__(self, fh, name: str):
        self.fh, self.name = fh, name
        try:
            self.zip = zipfile.ZipFile(fh, "r")
        except _DAMAGED as e:
            raise LoadError(f"load: {name} is not a zip archive written by dj.save ({e})") from None
        infos = self.zip.infolist()
        seen = set()
        for info in infos:
            if info.filename in seen:
                raise LoadError(f"load: {name} holds two members named {info.filename!r}; dj.save writes each "
                                f"name once, so the file was altered")
            seen.add(info.filename)
            self._check_member(info)
        self._check_no_overlap(infos)
        self.members = {info.filename: info for info in infos}

    def _check_member(self, info: zipfile.ZipInfo) -> None:
        where = f"load: member {info.filename!r} of {self.name}"
        if info.flag_bits & 0x1:
            raise LoadError(f"{where} is encrypted; dj.load reads only what dj.save writes")
        if info.compress_type == zipfile.ZIP_STORED:
            if info.file_size != info.compress_size:
                raise LoadError(f"{where} is stored uncompressed yet declares {info.file_size} bytes in "
                                f"{info.compress_size}: the file is corrupt or forged")
        elif info.compress_type == zipfile.ZIP_DEFLATED:
            if info.file_size > DEFLATE_MAX_RATIO * info.compress_size:
                raise LoadError(f"{where} declares {info.file_size} bytes inflated from {info.compress_size} "
                                f"compressed bytes, more than deflate can produce ({DEFLATE_MAX_RATIO}:1): "
                                f"a forged header (zip bomb)")
        else:
            raise LoadError(f"{where} uses compression method {info.compress_type}; dj.load accepts stored "
                            f"and deflated members only (re-save the file with dj.save)")

    def _check_no_overlap(self, infos) -> None:
        """Each member's bytes (local header through compressed data) lie apart from every other's."""
        spans = []
        for info in infos:
            head = b""
            if info.header_offset >= 0:
                self.fh.seek(info.header_offset)
                head = self.fh.read(_LOCAL_HEADER.size)
            if len(head) != _LOCAL_HEADER.size or head[:4] != b"PK\x03\x04":
                raise LoadError(f"load: member {info.filename!r} of {self.name} has no local header where "
                                f"the central directory points: the file is corrupt")
            _, n_name, n_extra = _LOCAL_HEADER.unpack(head)
            spans.append((info.header_offset, info.header_offset + _LOCAL_HEADER.size + n_name + n_extra
                          + info.compress_size, info.filename))
        spans.sort()
        for (_, end, a), (start, _, b) in zip(spans, spans[1:]):
            if start < end:
                raise LoadError(f"load: members {a!r} and {b!r} of {self.name} share bytes (overlapping "
                                f"entries, the shape of a zip bomb); dj.save never writes that")

    def info(self, name: str) -> zipfile.ZipInfo:
        info = self.members.get(name)
        if info is None:
            raise LoadError(f"load: {self.name} has no member {name!r}, which its pickle refers to: the file "
                            f"is truncated or was not written by dj.save")
        return info

    def read_bytes(self, name: str) -> bytes:
        """A small member (the format tag, the pickle), at most its declared size."""
        buf = self.read_into(name, self.info(name).file_size)
        return buf.tobytes()

    def read_into(self, name: str, nbytes: int, *, skip: int = 0) -> np.ndarray:
        """Member ``name`` (after its first ``skip`` bytes) as a new uint8 array of ``nbytes``,
        which must be exactly what its zip header declares."""
        info = self.info(name)
        if info.file_size != skip + nbytes:
            raise LoadError(f"load: member {name!r} of {self.name} holds {info.file_size - skip} bytes where "
                            f"the file's index declares {nbytes}: the file is corrupt or forged")
        buf = np.empty(nbytes, np.uint8)
        view = memoryview(buf)
        try:
            with self.zip.open(info) as m:
                m.read(skip)
                got = 0
                while got < nbytes:
                    k = m.readinto(view[got:got + _CHUNK])
                    if not k:
                        break
                    got += k
        except _DAMAGED as e:
            raise LoadError(f"load: member {name!r} of {self.name} cannot be read ({e})") from None
        if got != nbytes:
            raise LoadError(f"load: member {name!r} of {self.name} ends after {got} of its {nbytes} bytes")
        return buf

    def read_npy(self, name: str) -> tuple:
        """An array written by ``np.save`` (the first format's members) as ``(bytes, shape, dtype,
        fortran_order)``, the bytes a new uint8 array, after checking that its header declares a
        dtype of dispatch_jit and exactly the bytes that follow it."""
        info = self.info(name)
        try:
            with self.zip.open(info) as m:
                version = np.lib.format.read_magic(m)
                if version == (1, 0):
                    shape, fortran, dtype = np.lib.format.read_array_header_1_0(m)
                elif version == (2, 0):
                    shape, fortran, dtype = np.lib.format.read_array_header_2_0(m)
                else:
                    raise LoadError(f"load: member {name!r} of {self.name} is a .npy of version {version}; "
                                    f"dj.save writes version 1.0")
                header = m.tell()
        except _DAMAGED + (SyntaxError,) as e:      # a header that is no Python literal
            raise LoadError(f"load: member {name!r} of {self.name} is not a valid .npy array ({e})") from None
        if dtype not in BY_NP:
            raise LoadError(f"load: member {name!r} of {self.name} holds dtype {dtype}, which is no dtype of "
                            f"dispatch_jit (object arrays are never loaded)")
        if any(n < 0 for n in shape):
            raise LoadError(f"load: member {name!r} of {self.name} declares the negative shape {shape}")
        count = 1
        for n in shape:
            count *= n
        return self.read_into(name, count * dtype.itemsize, skip=header), shape, dtype, fortran

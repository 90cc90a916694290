"""Our own CPU kernels (``csrc/q8dot.cpp``, the ops ``torch.ops.llmx.q4_q8_linear``, ``q8_q8_linear`` and
``q8_rows_at``): built once per machine with the system's C++ compiler against the installed torch, kept beside the
converted models, and loaded into torch's dispatcher, where the eager modules find them; a compiled decode step calls
their C entry points directly (``C_SHIMS``, ``compile_options``), linked against the library by its soname, which
``load`` has loaded before any step is.

``problem()`` says why the kernels cannot run here (no AVX2, no compiler, a failed build), None when it can;
``load()`` builds what is missing and loads it, once per process. The build takes ~10 s, under a lock other
processes share, and its library is keyed by the source, torch's version and the compiler flags.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import os
import platform
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import torch

from ..settings import current as current_settings

SOURCE = Path(__file__).with_name("csrc") / "q8dot.cpp"
FLAGS = ("-O3", "-mavx2", "-mfma", "-mf16c", "-fopenmp", "-fPIC", "-shared", "-std=c++20", "-w")
LIBRARY = "llmx_q8dot"  # libllmx_q8dot.so: its soname, which a compiled step that calls it names
C_SHIMS = {  # each op's C entry point, which a compiled step calls directly (csrc/q8dot.cpp)
    "q4_q8_linear": "AOTITorchError aoti_torch_cpu_q4_q8_linear(AtenTensorHandle x, AtenTensorHandle codes, "
    "AtenTensorHandle scale, AtenTensorHandle low, AtenTensorHandle* out)",
    "q8_q8_linear": "AOTITorchError aoti_torch_cpu_q8_q8_linear(AtenTensorHandle x, AtenTensorHandle codes, "
    "AtenTensorHandle scale, AtenTensorHandle* out)",
    "q8_rows_at": "AOTITorchError aoti_torch_cpu_q8_rows_at(AtenTensorHandle x, AtenTensorHandle codes, "
    "AtenTensorHandle scale, AtenTensorHandle index, AtenTensorHandle* out)",
}


class NativeKernelError(RuntimeError):
    """The kernel could not be built or loaded (the message says why)."""


def _compiler() -> str | None:
    return shutil.which("g++") or shutil.which("c++")


def cpu_problem() -> str | None:
    """Why this CPU cannot run the kernel (it is written with AVX2, FMA and F16C instructions), None when it can."""
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return f"our q8dot kernel is written for x86's AVX2 and this CPU is {platform.machine()}"
    capability = torch.backends.cpu.get_cpu_capability()
    if capability not in ("AVX2", "AVX512"):
        return f"our q8dot kernel needs AVX2 and torch dispatches to {capability} here"
    return None


def problem() -> str | None:
    """Why the kernel cannot run here (None: it is loaded, or was built and loaded now)."""
    try:
        load()
    except NativeKernelError as error:
        return str(error)
    return None


def _command(compiler: str, out: Path) -> list[str]:
    root = Path(torch.__file__).parent
    abi = int(torch._C._GLIBCXX_USE_CXX11_ABI)
    return [
        compiler,
        *FLAGS,
        f"-D_GLIBCXX_USE_CXX11_ABI={abi}",
        f"-I{root / 'include'}",
        f"-I{root / 'include' / 'torch' / 'csrc' / 'api' / 'include'}",
        str(SOURCE),
        "-o",
        str(out),
        f"-L{root / 'lib'}",
        "-lc10",
        "-ltorch_cpu",
        f"-Wl,-rpath,{root / 'lib'},-soname,lib{LIBRARY}.so",
    ]


@functools.cache
def _build_key() -> str:
    """The source, torch's version, the flags and Python's, digested (read once per process)."""
    digest = hashlib.sha256()
    for part in (SOURCE.read_bytes(), torch.__version__.encode(), " ".join(FLAGS).encode(), sys.version.encode()):
        digest.update(part)
    return digest.hexdigest()[:16]


def library_path() -> Path:
    """Where this source's library, built for this torch and these flags, is kept (beside the converted models)."""
    return current_settings().cache / "native" / _build_key() / f"lib{LIBRARY}.so"


_LOADING = threading.Lock()  # two threads loading models at once: one registers the op, the other finds it
_FAILED: dict[Path, NativeKernelError] = {}  # a build that failed is not tried again by this process (~10 s each)


def load() -> Path:
    """Build the library if it is not on disk, load it into torch's dispatcher (once per process), and register the
    op's shape function for tracing; its path. Raises ``NativeKernelError`` with the compiler's first lines."""
    with _LOADING:
        cpu = cpu_problem()
        if cpu:
            raise NativeKernelError(cpu)
        path = library_path()
        if path in _FAILED:
            raise _FAILED[path]
        try:
            return _load()
        except NativeKernelError as error:
            _FAILED[path] = error
            raise


@functools.cache
def _load() -> Path:
    path = library_path()
    if not path.exists():
        compiler = _compiler()
        if compiler is None:
            raise NativeKernelError("building our q8dot kernel needs a C++ compiler (g++) and this machine has none")
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path.parent / "build.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # a second process waits here, then finds the library
            if not path.exists():
                staging = path.with_name(f"{path.name}.tmp{os.getpid()}")
                done = subprocess.run(_command(compiler, staging), capture_output=True, text=True)
                if done.returncode != 0:
                    staging.unlink(missing_ok=True)
                    first = " ".join((done.stderr or done.stdout).strip().splitlines()[:3])[:500]
                    raise NativeKernelError(
                        f"building our q8dot kernel failed (exit {done.returncode}) {first}".strip()
                    )
                staging.rename(path)
    torch.ops.load_library(str(path))

    @torch.library.register_fake("llmx::q4_q8_linear")
    def _q4_shape(x, codes, scale, low):  # (M, K) x (N, K/2) codes -> (M, N)
        return x.new_empty(x.shape[0], codes.shape[0])

    @torch.library.register_fake("llmx::q8_q8_linear")
    def _q8_shape(x, codes, scale):  # (M, K) x (N, K) codes -> (M, N)
        return x.new_empty(x.shape[0], codes.shape[0])

    @torch.library.register_fake("llmx::q8_rows_at")
    def _rows_shape(x, codes, scale, index):  # (M, K), index (M, T) -> (M, T)
        return x.new_empty(index.shape)

    return path


def compile_options() -> dict:
    """AOTInductor's options for a step that calls the ops: their C entry points, declared and linked by soname (found
    through ``LIBRARY_PATH`` at the link, ``linking``; already loaded by ``load`` when the step is)."""
    return {
        "aot_inductor.custom_ops_to_c_shims": {
            getattr(torch.ops.llmx, name).default: [shim] for name, shim in C_SHIMS.items()
        },
        "aot_inductor.custom_op_libs": [LIBRARY],
    }


@contextlib.contextmanager
def linking():
    """While the block runs, the compiler links against the library: its folder on ``LIBRARY_PATH`` (the compiler's
    subprocesses read the process's environment), the variable as it was afterwards."""
    folder = str(load().parent)
    before = os.environ.get("LIBRARY_PATH")
    os.environ["LIBRARY_PATH"] = os.pathsep.join([folder, *filter(None, (before or "").split(os.pathsep))])
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("LIBRARY_PATH", None)
        else:
            os.environ["LIBRARY_PATH"] = before

"""A process's resident memory read from ``/proc`` (Linux), and llama.cpp's, measured the same way.

Owns the readings the memory benchmark (``inference.bench.memory``) takes inside a child process:
the resident size split into anonymous and file-backed pages, and the largest mappings. It imports
the standard library only, so it also runs as a script by its path,

    python -P inference/bench/resident.py MODEL.gguf THREADS

in a child that holds llama.cpp (``llama-cpp-python``) on the same GGUF file and nothing else: no
torch, no engine. That child reads its memory the way ours are read: after importing the library
(the baseline), after loading the file with a 2,048-token context, and after 16 greedy tokens.
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

LLAMA_CPP_CONTEXT = 2048  # tokens of context llama.cpp's memory is measured with
PROMPT = "The cat sat on the mat because"  # what every memory child decodes after


@dataclass(frozen=True)
class Resident:
    """The process's resident memory, in bytes."""

    rss: int
    anonymous: int  # the process's own pages (heap, anonymous mappings)
    file: int  # pages of mapped files (libraries, a mapped checkpoint) and shared memory

    @staticmethod
    def now() -> Resident:
        fields = {}
        for line in Path("/proc/self/smaps_rollup").read_text().splitlines()[1:]:
            name, value, *_ = line.split()
            fields[name.rstrip(":")] = int(value) * 1024  # the file says kB (KiB)
        return Resident(fields["Rss"], fields["Anonymous"], fields["Rss"] - fields["Anonymous"])


def largest_mappings(count: int = 6) -> list[tuple[str, int, int]]:
    """The ``count`` largest resident mappings by name: (path or [heap]/[anon], resident bytes, anonymous bytes)."""
    totals: dict[str, list[int]] = {}
    current = None
    for line in Path("/proc/self/smaps").read_text().splitlines():
        parts = line.split()
        if not parts[0].endswith(":"):  # a mapping's header: address range, perms, offset, device, inode, [path]
            current = totals.setdefault(parts[5] if len(parts) > 5 else "[anon]", [0, 0])
        elif parts[0] == "Rss:":
            current[0] += int(parts[1]) * 1024
        elif parts[0] == "Anonymous:":
            current[1] += int(parts[1]) * 1024
    ranked = sorted(totals.items(), key=lambda item: -item[1][0])[:count]
    return [(name, rss, anonymous) for name, (rss, anonymous) in ranked]


def mapped_data_files() -> list[str]:
    """The files this process has mapped that are not libraries (a mapped checkpoint would be one)."""
    fields = (line.split(maxsplit=5) for line in Path("/proc/self/maps").read_text().splitlines())
    paths = {parts[5] for parts in fields if len(parts) > 5 and parts[5].startswith("/")}
    return sorted(path for path in paths if ".so" not in Path(path).name)


def llama_cpp_here(gguf_path: str, threads: int, new_tokens: int = 16) -> dict:
    """llama.cpp's memory in this process: the library imported, ``gguf_path`` loaded, ``new_tokens`` decoded."""
    from itertools import islice

    import llama_cpp

    points = {"baseline": Resident.now()}
    llm = llama_cpp.Llama(
        model_path=gguf_path, n_threads=threads, n_threads_batch=threads, n_ctx=LLAMA_CPP_CONTEXT, verbose=False
    )
    points["loaded"] = Resident.now()
    prompt = llm.tokenize(PROMPT.encode())
    decoded = list(islice(llm.generate(prompt, temp=0.0), new_tokens))  # greedy
    points["decoded"] = Resident.now()
    return {
        "mode": f"llama.cpp {llama_cpp.__version__}",
        "model": Path(gguf_path).name,
        "points": {name: asdict(value) for name, value in points.items()},
        "tokens": len(decoded),
        "context": LLAMA_CPP_CONTEXT,
        "torch_imported": "torch" in sys.modules,
        "largest_mappings": largest_mappings(),
        "mapped_files": mapped_data_files(),
    }


if __name__ == "__main__":  # run by path (``python -P``): the standard library and llama.cpp only
    gguf, thread_count = sys.argv[1:3]
    print(json.dumps(llama_cpp_here(gguf, int(thread_count))))

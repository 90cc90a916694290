"""The operator's settings: every ``LLM_EXPLORER_*`` variable read and checked in one place, once, with a clear
message for a value the program cannot use; docs/settings.md's table says what ``inference.settings`` reads."""

from __future__ import annotations

import ast
import os
import re
from pathlib import Path

import pytest

from inference import settings
from inference.settings import ModelListError, Settings, SettingsError
from ui.classroom import settings as class_settings
from ui.classroom.settings import ClassSettings

ROOT = Path(__file__).resolve().parents[1]


def test_unset_means_the_defaults():
    read = Settings.from_env({})
    assert read == Settings(cache=read.cache) and read.cache.name == "llm-explorer"
    assert read.quant is None and read.server == "thread" and read.prefix_cache and read.slots is None
    assert read.kv == 16  # the generation server on paged blocks of 16 positions
    klass = ClassSettings.from_env({})
    assert klass.room is None and klass.class_id == "class" and klass.teacher_key is None  # the room in memory


def test_a_rooms_password_is_never_in_a_message():
    with pytest.raises(SettingsError) as raised:
        ClassSettings.from_env({"LLM_EXPLORER_ROOM": "http://:hunter2@127.0.0.1:6379"})
    assert "hunter2" not in str(raised.value)
    with pytest.raises(SettingsError) as raised:
        ClassSettings.from_env({"LLM_EXPLORER_ROOM": ":hunter2@127.0.0.1:6379"})
    assert "hunter2" not in str(raised.value)


def test_every_value_is_read_and_checked(tmp_path):
    read = Settings.from_env(
        {
            "LLM_EXPLORER_MODEL": "models/x.gguf",
            "LLM_EXPLORER_MODELS": "tiny=/tmp/t; other=org/name",
            "LLM_EXPLORER_DEVICE": "CUDA:1",
            "LLM_EXPLORER_DTYPE": "BF16",
            "LLM_EXPLORER_QUANT": " GGUF ",
            "LLM_EXPLORER_COMPILE": "on",
            "LLM_EXPLORER_THREADS": "1",
            "LLM_EXPLORER_SERVER": "process",
            "LLM_EXPLORER_PREFIX_CACHE": "off",
            "LLM_EXPLORER_SLOTS": "32",
            "LLM_EXPLORER_KV": " Paged:8 ",
            "LLM_EXPLORER_KV_POSITIONS": "8192",
            "LLM_EXPLORER_CACHE": str(tmp_path / "cache"),
        }
    )
    assert read == Settings(
        "models/x.gguf",
        (("tiny", "/tmp/t"), ("other", "org/name")),
        "cuda:1",
        "bf16",
        "gguf",
        True,
        1,
        "process",
        False,
        32,
        8,
        8192,
        tmp_path / "cache",
    )
    klass = ClassSettings.from_env(
        {
            "LLM_EXPLORER_TEACHER_KEY": " a phrase ",
            "LLM_EXPLORER_ROOM": "redis://:secret@127.0.0.1:6380/2",
            "LLM_EXPLORER_CLASS_ID": "7B-Physics",
        }
    )
    assert klass == ClassSettings("a phrase", "redis://:secret@127.0.0.1:6380/2", "7b-physics")


@pytest.mark.parametrize(
    "name, value, message",
    [
        ("QUANT", "fp8", "LLM_EXPLORER_QUANT='fp8': use one of gguf, int8, int4, none"),
        ("SERVER", "forked", "LLM_EXPLORER_SERVER='forked': use one of thread, process"),
        ("PREFIX_CACHE", "maybe", "LLM_EXPLORER_PREFIX_CACHE='maybe': use one of on, off"),
        ("SLOTS", "1000", "LLM_EXPLORER_SLOTS='1000': use a whole number from 1 to 256"),
        ("SLOTS", "many", "LLM_EXPLORER_SLOTS='many': use a whole number from 1 to 256"),
        (
            "KV",
            "paged:0",
            "LLM_EXPLORER_KV='paged:0': use paged, paged:BLOCK (a block size of at least 1) or contiguous",
        ),
        ("KV", "slots", "LLM_EXPLORER_KV='slots': use paged, paged:BLOCK"),
        (
            "KV_POSITIONS",
            "512",
            "LLM_EXPLORER_KV_POSITIONS='512': use a whole number of at least 1024 (unset: slots × 1,024)",
        ),
        ("KV_POSITIONS", "8k", "LLM_EXPLORER_KV_POSITIONS='8k': use a whole number of at least 1024"),
        ("THREADS", "0", "LLM_EXPLORER_THREADS='0': use a whole number of at least 1 (unset: every core)"),
        ("COMPILE", "maybe", "LLM_EXPLORER_COMPILE='maybe': use 1 or 0 (on or off)"),
        ("DEVICE", "tpu", "LLM_EXPLORER_DEVICE='tpu': use cpu, cuda, cuda:N or mps"),
        ("DTYPE", "int3", "LLM_EXPLORER_DTYPE='int3': use one of float32"),
        ("MODELS", "no-equals-sign", "LLM_EXPLORER_MODELS entry 'no-equals-sign' is not name=source"),
        ("MODELS", "bad name=/x", "model name 'bad name' must be 1-64 letters"),
        ("ROOM", "http://:secret@host:80", "LLM_EXPLORER_ROOM='http://…': use a Redis url"),
        ("ROOM", "127.0.0.1:6379", "LLM_EXPLORER_ROOM='127.0.0.1:6379': use a Redis url"),
        ("CLASS_ID", "7b physics", "LLM_EXPLORER_CLASS_ID='7b physics': use 1 to 32 lower-case letters"),
        ("CLASS_ID", "-x", "LLM_EXPLORER_CLASS_ID='-x': use 1 to 32"),
    ],
)
def test_a_value_the_program_cannot_use_is_named_with_what_it_accepts(name, value, message):
    reader = ClassSettings if name in ("ROOM", "CLASS_ID") else Settings
    with pytest.raises(SettingsError) as raised:
        reader.from_env({f"LLM_EXPLORER_{name}": value})
    assert message in str(raised.value)
    assert isinstance(raised.value, ModelListError) == (name == "MODELS")


def test_the_cache_folder_is_made_or_named_with_why_it_cannot_be(tmp_path):
    """The folder converted models are kept in is made when the settings are read (as a model's first load would
    make it); one that cannot be made or written is named with the operating system's reason, not left for the
    first load to fail on."""
    made = tmp_path / "new" / "deep"
    assert Settings.from_env({"LLM_EXPLORER_CACHE": str(made)}).cache == made and made.is_dir()
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    for value, why in ((a_file, "cannot be made (File exists)"), (a_file / "sub", "cannot be made (Not a directory)")):
        with pytest.raises(SettingsError) as raised:
            Settings.from_env({"LLM_EXPLORER_CACHE": str(value)})
        assert str(raised.value) == (
            f"LLM_EXPLORER_CACHE={str(value)!r}: the folder {why}; use a folder this user can write"
        )
    with pytest.raises(SettingsError) as raised:  # unset: the default under XDG_CACHE_HOME, named as such
        Settings.from_env({"XDG_CACHE_HOME": str(a_file)})
    assert str(raised.value).startswith(f"the cache folder {str(a_file / 'llm-explorer')!r} (LLM_EXPLORER_CACHE unset)")
    if os.geteuid() != 0:  # root writes anywhere: a folder it cannot write exists only for other users
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o500)
        with pytest.raises(SettingsError, match="the folder cannot be written"):
            Settings.from_env({"LLM_EXPLORER_CACHE": str(locked)})


def test_kv_names_the_servers_block_size_or_the_slot_cache():
    from inference import ServeConfig

    assert [Settings.from_env({"LLM_EXPLORER_KV": v}).kv for v in ("paged", "paged:4", "contiguous")] == [16, 4, None]
    assert Settings().kv == ServeConfig().kv_block_size  # the setting's default is the server's


def test_the_dtype_and_device_names_are_the_loaders():
    from inference.model.loader import DTYPES

    assert set(settings.DTYPE_CHOICES) == set(DTYPES)
    for device in ("cpu", "cuda", "cuda:0", "mps"):
        assert Settings.from_env({"LLM_EXPLORER_DEVICE": device}).device == device


def test_a_process_reads_its_settings_once(monkeypatch):
    monkeypatch.setenv("LLM_EXPLORER_SLOTS", "8")
    first = settings.reload()
    monkeypatch.setenv("LLM_EXPLORER_SLOTS", "9")
    assert settings.current() is first and first.slots == 8  # read at start, kept
    assert settings.reload().slots == 9


def environment_reads(path: Path) -> list[str]:
    """The ``LLM_EXPLORER_*`` names ``path`` reads from the environment: ``os.environ.get(name)``,
    ``os.environ[name]``, ``os.getenv(name)``, with the name written out or held in a module constant."""
    tree = ast.parse(path.read_text())
    constants = {
        target.id: node.value.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
        for target in node.targets
        if isinstance(target, ast.Name)
    }

    def setting(node) -> str | None:
        value = node.value if isinstance(node, ast.Constant) else constants.get(getattr(node, "id", None))
        return value if isinstance(value, str) and value.startswith("LLM_EXPLORER_") else None

    found = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.args
            and (
                (node.func.attr == "get" and ast.unparse(node.func.value).endswith("environ"))
                or node.func.attr == "getenv"
            )
        ):
            found.append(setting(node.args[0]))
        elif (
            isinstance(node, ast.Subscript)
            and isinstance(node.ctx, ast.Load)
            and ast.unparse(node.value).endswith("environ")
        ):
            found.append(setting(node.slice))
    return [name for name in found if name]


def test_nothing_else_reads_a_setting():
    """``inference/settings.py`` is the one place of the library, the app and its scripts that reads
    ``LLM_EXPLORER_*`` (writing one for a child server, as the benchmarks do, is no read)."""
    readers = [
        f"{path.relative_to(ROOT)}: {name}"
        for folder in ("inference", "ui", "pages", "scripts")
        for path in sorted((ROOT / folder).rglob("*.py"))
        if str(path.relative_to(ROOT)) not in ("inference/settings.py", "ui/classroom/settings.py")
        for name in environment_reads(path)
    ]
    readers += [f"app.py: {name}" for name in environment_reads(ROOT / "app.py")]
    assert not readers, readers


def test_the_reader_check_can_fail(tmp_path):
    planted = tmp_path / "planted.py"
    planted.write_text(
        'import os\nKEY = "LLM_EXPLORER_TEACHER_KEY"\na = os.environ.get(KEY, "")\n'
        'b = os.environ["LLM_EXPLORER_SLOTS"]\nc = os.getenv("LLM_EXPLORER_QUANT")\n'
        'env = {**os.environ, "LLM_EXPLORER_SERVER": "process"}\n'
    )
    assert environment_reads(planted) == ["LLM_EXPLORER_TEACHER_KEY", "LLM_EXPLORER_SLOTS", "LLM_EXPLORER_QUANT"]


def test_the_settings_table_lists_every_setting_with_its_default():
    readme = (ROOT / "docs" / "settings.md").read_text()
    rows = re.findall(r"^\| `(LLM_EXPLORER_[A-Z_]+)` \| ([^|]+) \|", readme, flags=re.M)
    assert rows == [(v.name, v.default) for v in settings.VARIABLES + class_settings.VARIABLES]
    for variables, record in ((settings.VARIABLES, Settings), (class_settings.VARIABLES, ClassSettings)):
        fields = set(record.__dataclass_fields__)
        named = {v.name.removeprefix("LLM_EXPLORER_").lower() for v in variables}
        assert named == fields, named ^ fields

"""The native programs of the evaluation (`kind = "cargo"` or `kind = "c"` in a question file's
[cli.*]): built once with pinned versions under WORK/native/, and their corpus for the static
retrievers, every function of the program's sources, extracted from Rust and C text (comments
and literals masked, braces matched). See eval/README.md, "Native questions".

Plain Python 3.9+ standard library: `python3 eval/test_scoring.py` tests the extractors.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
from pathlib import Path

from scoring import SIGNATURE, WHOLE, Func, Prompt

EVAL = Path(__file__).resolve().parent


def is_native(cli: dict) -> bool:
    return cli.get("kind") in ("cargo", "c")


# --- masking --------------------------------------------------------------------------------

_RUST_TOKENS = re.compile(
    r"""//[^\n]*|/\*|b?r(\#*)"|b?"(?:\\.|[^"\\])*"|b?'(?:\\u\{[0-9a-fA-F]+\}|\\.|[^'\\\n])'""",
    re.S,
)
_C_TOKENS = re.compile(r"""//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])+'""", re.S)


def _blank(s: str) -> str:
    return re.sub(r"[^\n]", " ", s)


def mask_rust(text: str) -> str:
    """`text` with comments and string and character literals blanked (line breaks kept), so
    braces and keywords can be matched on it. Lifetimes (`'a`) stay."""
    out, i = [], 0
    while True:
        m = _RUST_TOKENS.search(text, i)
        if not m:
            out.append(text[i:])
            return "".join(out)
        out.append(text[i : m.start()])
        tok = m.group(0)
        end = m.end()
        if tok == "/*":  # nested block comments
            depth, j = 1, m.end()
            while depth and j < len(text):
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            end = j
        elif m.group(1) is not None:  # raw string r#"..."#
            close = text.find('"' + m.group(1), m.end())
            end = len(text) if close < 0 else close + 1 + len(m.group(1))
        out.append(_blank(text[m.start() : end]))
        i = end


def mask_c(text: str) -> str:
    return _C_TOKENS.sub(lambda m: _blank(m.group(0)), text)


def _line_of(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


def _match_brace(masked: str, open_pos: int) -> int:
    depth = 0
    for j in range(open_pos, len(masked)):
        c = masked[j]
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return j
    return len(masked) - 1


def _func(qualname: str, path: str, rel: str, lines: list[str], start: int, body_line: int, end: int) -> Func:
    header = [ln for ln in lines[start - 1 : body_line] if not ln.strip().startswith("//")]
    return Func(qualname=qualname, file=path, rel=rel, line=start, start=start, end=end, code="\n".join(lines[start - 1 : end]), header="\n".join(header))


# --- Rust -----------------------------------------------------------------------------------

_RUST_ITEM = re.compile(r"\b(fn|impl|trait|mod)\b|\bmacro_rules!|[{};]")


def _impl_type(header: str) -> str:
    """The self type's name of an `impl` header (`impl<'a, W: Write> Trait for Foo<'a, W>`)."""
    h = header.strip()[len("impl") :].strip()
    if h.startswith("<"):  # generics
        depth = 0
        for j, c in enumerate(h):
            depth += c == "<"
            depth -= c == ">" and h[j - 1 : j] != "-"
            if depth == 0:
                h = h[j + 1 :]
                break
    # ` for ` at angle depth 0 separates the trait from the self type.
    depth, cut = 0, None
    for j, c in enumerate(h):
        if c == "<":
            depth += 1
        elif c == ">" and h[j - 1 : j] != "-":
            depth -= 1
        elif depth == 0 and h.startswith(" for ", j):
            cut = j + 5
    ty = h[cut:] if cut is not None else h
    ty = re.split(r"\bwhere\b", ty)[0].strip().lstrip("&").replace("mut ", "").replace("dyn ", "").strip()
    ty = ty.split("<", 1)[0].strip()
    return ty.rsplit("::", 1)[-1]


def rust_functions(path: str, rel: str, text: str, module: list[str]) -> list[Func]:
    """Every function and method of a Rust file with a body, named `crate::module::Type::name`
    as rustc's symbols name them (trait impls by their self type). A function nested in a
    function, and functions in macro bodies, are part of their parent and not listed."""
    masked = mask_rust(text)
    lines = text.splitlines()
    out: list[Func] = []
    # Scopes: (kind, name); kinds: mod, impl, trait, fn, macro, block.
    stack: list[tuple[str, str]] = []
    pending: tuple[str, int] | None = None  # (keyword, position)
    for m in _RUST_ITEM.finditer(masked):
        tok = m.group(0)
        if tok in ("fn", "impl", "trait", "mod", "macro_rules!"):
            if tok == "fn" and not re.match(r"fn\s+[A-Za-z_]", masked[m.start() :]):
                continue  # a `fn(...)` pointer type
            if pending is None:
                pending = (tok, m.start())
            continue
        if tok == ";":
            if pending and pending[0] in ("fn", "mod"):
                pending = None  # a declaration without a body, `mod x;`
            continue
        if tok == "}":
            if stack:
                stack.pop()
            continue
        # `{`
        if pending is None or any(k in ("fn", "macro") for k, _ in stack):
            stack.append(("block", ""))
            pending = None
            continue
        kw, at = pending
        pending = None
        header = masked[at : m.start()]
        if kw == "fn":
            name = re.match(r"fn\s+([A-Za-z_][A-Za-z0-9_]*)", header)
            owner = [n for k, n in stack if k in ("mod", "impl", "trait")]
            start = _line_of(masked, at)
            end = _line_of(masked, _match_brace(masked, m.start()))
            if name:
                out.append(_func("::".join([*module, *owner, name.group(1)]), path, rel, lines, start, _line_of(masked, m.start()), end))
            stack.append(("fn", ""))
        elif kw == "impl":
            stack.append(("impl", _impl_type(header)))
        elif kw == "trait":
            t = re.match(r"trait\s+([A-Za-z_][A-Za-z0-9_]*)", header)
            stack.append(("trait", t.group(1) if t else ""))
        elif kw == "mod":
            t = re.match(r"mod\s+([A-Za-z_][A-Za-z0-9_]*)", header)
            stack.append(("mod", t.group(1) if t else ""))
        else:
            stack.append(("macro", ""))
    return out


def rust_module(pkg_dir: Path, file: Path, crate: str) -> list[str]:
    """`crate::a::b` of `<pkg>/src/a/b.rs` (or `a/b/mod.rs`): relative to the nearest directory
    above the file holding `lib.rs` or `main.rs`, the crate's root."""
    root = file.parent
    while root != pkg_dir and not ((root / "lib.rs").exists() or (root / "main.rs").exists()):
        root = root.parent
    parts = list(file.relative_to(root).with_suffix("").parts)
    if parts and parts[-1] in ("lib", "main", "mod"):
        parts.pop()
    return [crate, *parts]


# --- C --------------------------------------------------------------------------------------


def c_functions(path: str, rel: str, text: str) -> list[Func]:
    """Every function definition of a C file: a top-level `{` after `name(...)`; the function
    starts on the line of its name."""
    masked = mask_c(text)
    lines = text.splitlines()
    out: list[Func] = []
    depth, j = 0, 0
    while j < len(masked):
        c = masked[j]
        if c == "{" and depth == 0:
            end = _match_brace(masked, j)
            before = masked[:j].rstrip()
            if before.endswith(")"):
                # The matching `(` of the parameter list, then the name before it.
                d, k = 0, len(before) - 1
                while k >= 0:
                    d += before[k] == ")"
                    d -= before[k] == "("
                    if d == 0:
                        break
                    k -= 1
                name = re.search(r"([A-Za-z_][A-Za-z0-9_]*)\s*$", before[:k])
                if name and name.group(1) not in ("if", "while", "for", "switch"):
                    start = _line_of(masked, name.start(1))
                    out.append(_func(name.group(1), path, rel, lines, start, _line_of(masked, j), _line_of(masked, end)))
            j = end + 1
            continue
        j += 1
    return out


# --- programs -------------------------------------------------------------------------------


def _digest(*parts: str) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(p.encode())
    return h.hexdigest()[:12]


def cargo_home() -> Path:
    return Path(os.environ.get("CARGO_HOME") or Path.home() / ".cargo")


def _run(cmd: list[str], **kw) -> None:
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        raise SystemExit(f"eval: `{' '.join(map(str, cmd))}` failed ({r.returncode}):\n{r.stderr[-4000:]}")


def build(name: str, cli: dict, work: Path, log) -> Path:
    """The program's executable, built once per spec (`cargo install --locked` of the pinned
    version into its own root; gcc for C)."""
    spec = json.dumps(cli, sort_keys=True)
    if cli["kind"] == "cargo":
        root = work / "native" / f"{cli['crate']}-{cli['version']}"
        exe = root / "bin" / cli["bin"]
        stamp = root / ".eval-stamp"
        if not (exe.exists() and stamp.exists() and stamp.read_text() == _digest(spec)):
            log(f"{name}: cargo install {cli['crate']} {cli['version']} into {root} (once; minutes)")
            env = {k: v for k, v in os.environ.items() if k != "CARGO_TARGET_DIR"}
            env.update(cli.get("env", {}))
            _run(["cargo", "install", cli["crate"], "--version", cli["version"], "--locked", "--force", "--root", str(root)], env=env)
            stamp.write_text(_digest(spec))
        return exe
    srcs = [EVAL / "native" / s for s in cli["sources"]]
    out = work / "native" / f"{name}-{_digest(spec, *(s.read_text() for s in srcs))}"
    exe = out / cli["bin"]
    if not exe.exists():
        out.mkdir(parents=True, exist_ok=True)
        log(f"{name}: gcc {' '.join(cli.get('cflags', []))}")
        _run(["gcc", *cli.get("cflags", []), "-o", str(exe), *map(str, srcs)])
    return exe


def _cargo_packages(cli: dict, exe: Path) -> list[tuple[str, Path]]:
    """(crate name, directory) of every registry package whose code is in the program: the
    `registry/src/<index>/<crate>-<version>/` directories its debug information names (not
    build-time crates such as proc macros, nor other platforms' crates of its Cargo.lock), the
    program's own first."""
    regs = sorted((cargo_home() / "registry" / "src").glob("*"))
    own = f"{cli['crate']}-{cli['version']}"
    named = set(re.findall(rb"/registry/src/[^/\x00]+/([A-Za-z0-9_.+-]+?-\d[A-Za-z0-9_.+-]*)/", exe.read_bytes()))
    out: list[tuple[str, Path]] = []
    for dir_name in sorted({n.decode() for n in named} | {own}):
        d = next((r / dir_name for r in regs if (r / dir_name).is_dir()), None)
        if d is None:
            continue
        pkg = re.match(r"(.+?)-\d", dir_name).group(1)
        out.append((cli.get("crate_names", {}).get(pkg, pkg.replace("-", "_")), d))
    if not any(d.name == own for _, d in out):
        raise SystemExit(f"eval: {own} is not in {cargo_home()}/registry/src")
    out.sort(key=lambda p: p[1].name != own)
    return out


class NativeCorpus:
    """Every function of a native program's sources: the `.rs` files of its packages (not
    their tests/, benches/, examples/ or build scripts), or its C files."""

    def __init__(self, cli: dict, exe: Path) -> None:
        self.files: list[Path] = []
        self.funcs: list[Func] = []
        self.file_text: dict[str, str] = {}
        if cli["kind"] == "cargo":
            self.lang = "rust"
            pkgs = _cargo_packages(cli, exe)
            self.sp = pkgs[0][1].parent
            for crate, d in pkgs:
                for p in sorted(d.rglob("*.rs")):
                    rel_parts = p.relative_to(d).parts
                    if rel_parts[0] in ("tests", "benches", "examples", "target") or rel_parts == ("build.rs",):
                        continue
                    self._add(p, lambda path, rel, text, p=p, d=d, crate=crate: rust_functions(path, rel, text, rust_module(d, p, crate)))
        else:
            self.lang = "c"
            self.sp = EVAL / "native"
            for s in cli["sources"]:
                self._add(self.sp / s, c_functions)
        self.by_name: dict[str, list[int]] = {}
        for i, f in enumerate(self.funcs):
            self.by_name.setdefault(f.qualname.rsplit("::", 1)[-1], []).append(i)

    def _add(self, p: Path, extract) -> None:
        try:
            text = p.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            return
        self.files.append(p)
        self.file_text[str(p)] = text
        self.funcs.extend(extract(str(p), str(p.relative_to(self.sp)), text))

    def rel_path(self, p: str) -> str:
        return str(Path(p).relative_to(self.sp))

    def chunk(self, i: int) -> str:
        f = self.funcs[i]
        return f"### `{f.qualname}` ({f.rel}:{f.start}-{f.end})\n\n```{self.lang}\n{f.code}\n```\n\n"

    def find(self, qualname: str, rel: str, line: int | None) -> Func:
        cands = [f for f in self.funcs if f.qualname == qualname and f.rel == rel and (line is None or f.line == line)]
        if not cands:
            raise SystemExit(f"eval: ground truth {qualname} ({rel}) is not in the program's source")
        return cands[0]

    def files_in(self, prompt: Prompt) -> set[str]:
        """As the Python corpus's: files of the functions whose whole text or signature the
        prompt shows, where the prompt names the function and the file."""
        out: set[str] = set()
        for name, idx in self.by_name.items():
            if name not in prompt.text:
                continue
            for i in idx:
                f = self.funcs[i]
                if f.file in out or f.rel.split("/", 1)[-1] not in prompt.text:
                    continue
                if prompt.state(f) in (WHOLE, SIGNATURE):
                    out.add(f.file)
        return out

use super::*;

fn lines(src: &str) -> Vec<String> {
    src.lines().map(String::from).collect()
}

const LINEGEN: &str = r#"import sys


class LineGenerator(Visitor[Line]):
    """Generates lines.

    def not_a_def(self):
"""

    def __init__(self, mode: Mode) -> None:
        self.mode = mode

    def visit_default(self, node: LN) -> Iterator[Line]:
        """Default `visit()` implementation."""
        if isinstance(node, Leaf):
            yield from self.line()
        yield from super().visit_default(node)

    @property
    def width(self) -> int:
        return 1

    @width.setter
    def width(self, v: int) -> None:
        pass

    class Inner:
        def visit_default(self):
            return 2


@lru_cache
@other(
    x=1,
)
async def transform_line(
    line: Line,
    mode: Mode = (
        1,
    ),
) -> Iterator[Line]:
    def _rhs(self: object, line: Line) -> Iterator[Line]:
        return line
    text = """
def fake():
"""
    return _rhs(line)

if sys.version_info >= (3, 8):
    def twice(): return 1
else:
    def twice(): return 2

@overload
def over(x: int) -> int: ...
@typing.overload
def over(x: str) -> str: ...
def over(x):
    return x

def has___dunder():
    return (lambda: 1)()
"#;

#[test]
fn definitions_follow_classes_decorators_async_and_multi_line_signatures() {
    let defs = definitions(&lines(LINEGEN));
    let find = |q: &str| defs.iter().filter(|d| d.qualname() == q).collect::<Vec<_>>();
    let one = |q: &str| -> &Def {
        let f = find(q);
        assert_eq!(f.len(), 1, "{q}: {defs:#?}");
        f[0]
    };
    assert!(find("not_a_def").is_empty() && find("LineGenerator.not_a_def").is_empty(), "a def in a docstring is none");
    let v = one("LineGenerator.visit_default");
    assert_eq!((v.first_line, v.last_line), (13, 17));
    assert_eq!(v.mypyc_short_name().as_deref(), Some("LineGenerator.visit_default"));
    assert_eq!((one("LineGenerator.__init__").first_line, one("LineGenerator.__init__").last_line), (10, 11));
    // A decorated method starts at its decorator.
    assert_eq!(find("LineGenerator.width").iter().map(|d| (d.first_line, d.last_line)).collect::<Vec<_>>(), vec![(19, 21), (23, 25)]);
    let inner = one("LineGenerator.Inner.visit_default");
    assert_eq!((inner.first_line, inner.last_line), (28, 29));
    assert_eq!(inner.mypyc_short_name(), None, "mypyc compiles no method of a nested class");
    // Decorators (one spanning lines), async, a multi-line signature with brackets inside it,
    // a nested function, and a string holding `def` at column 0.
    let t = one("transform_line");
    assert_eq!((t.first_line, t.last_line), (32, 47));
    assert!(!t.overload);
    let rhs = one("transform_line.<locals>._rhs");
    assert_eq!(rhs.mypyc_short_name(), None, "a nested function is mypyc's callable class, not mapped");
    assert!(find("fake").is_empty(), "{defs:#?}");
    assert_eq!(find("twice").len(), 2);
    let over = find("over");
    assert_eq!(over.iter().map(|d| d.overload).collect::<Vec<_>>(), vec![true, true, false]);
    assert_eq!((over[2].first_line, over[2].last_line), (58, 59));
    assert_eq!(one("has___dunder").last_line, 62);
}

#[test]
fn exported_names_and_module_prefixes_are_mypycs() {
    assert_eq!(exported_name("linegen.LineGenerator.visit_default"), "linegen___LineGenerator___visit_default");
    assert_eq!(exported_name("black.has___dunder"), "black___has___3_dunder");
    // The shortest unique suffix; a leaf name two modules share takes its parent.
    let p = module_prefixes(&["black", "black.linegen", "blib2to3.pgen2.driver", "a.util", "b.util"]);
    assert_eq!(p["black"], "black.");
    assert_eq!(p["black.linegen"], "linegen.");
    assert_eq!(p["blib2to3.pgen2.driver"], "driver.");
    assert_eq!((p["a.util"].as_str(), p["b.util"].as_str()), ("a.util.", "b.util."));
    // One module alone: no prefix at all.
    assert_eq!(module_prefixes(&["solo"])["solo"], "");
}

#[test]
fn c_names_map_to_python_functions_and_ambiguity_is_refused() {
    let group = [
        Module { name: "black.linegen".into(), source: "/sp/black/linegen.py".into() },
        Module { name: "black".into(), source: "/sp/black/__init__.py".into() },
    ];
    let init = "def main():\n    pass\n\nclass linegen:\n    def transform_line(self):\n        pass\n";
    let map = name_map(&group, &mut |p: &Path| Some(lines(if p.ends_with("linegen.py") { LINEGEN } else { init })));
    let got = |c: &str| map.get(c).cloned().flatten();
    let v = got("CPyDef_linegen___LineGenerator___visit_default").expect("visit_default");
    assert_eq!(
        v,
        Target {
            file: "/sp/black/linegen.py".into(),
            name: "visit_default".into(),
            qualname: "LineGenerator.visit_default".into(),
            first_line: 13,
            last_line: 17
        }
    );
    assert_eq!(got("CPyDef_linegen___transform_line").map(|t| t.first_line), Some(32));
    assert_eq!(got("CPyDef_black___main").map(|t| (t.qualname, t.first_line, t.last_line)), Some(("main".into(), 1, 2)));
    assert_eq!(got("CPyDef_black___linegen___transform_line").map(|t| t.qualname), Some("linegen.transform_line".into()));
    assert_eq!(got("CPyDef_linegen___has___3_dunder").map(|t| t.qualname), Some("has___dunder".into()));
    // Two definitions, one name: refused. Overload stubs do not count.
    assert_eq!(map.get("CPyDef_linegen___twice"), Some(&None));
    // A property's getter keeps its name, its setter is mypyc's `__mypyc_setter__<name>`.
    assert_eq!(got("CPyDef_linegen___LineGenerator___width").map(|t| t.first_line), Some(19));
    assert_eq!(
        got("CPyDef_linegen___LineGenerator_____mypyc_setter__width").map(|t| (t.qualname, t.first_line)),
        Some(("LineGenerator.width".into(), 23))
    );
    assert_eq!(got("CPyDef_linegen___over").map(|t| t.first_line), Some(58));
    // Nested functions, nested classes, generator bodies and lambdas are not mapped.
    for c in [
        "CPyDef_linegen____rhs_transform_line_obj_____call__",
        "CPyDef_linegen___LineGenerator___Inner___visit_default",
        "CPyDef_linegen___line_LineGenerator_gen_____mypyc_generator_helper__",
        "CPyDef_linegen_____mypyc_lambda__0_has___3_dunder_obj_____call__",
    ] {
        assert_eq!(map.get(c), None, "{c}");
    }
}

#[test]
fn recorded_functions_of_the_runtime_module_become_python_functions() {
    let d = tempfile::tempdir().unwrap();
    let sp = d.path();
    let so = "cpython-311-x86_64-linux-gnu.so";
    let runtime = sp.join(format!("30fcd23745efe32ce681__mypyc.{so}"));
    std::fs::write(&runtime, b"\x7fELF").unwrap();
    std::fs::create_dir_all(sp.join("black")).unwrap();
    let shim = b"\x7fELF...PyInit_linegen\x0030fcd23745efe32ce681__mypyc\x00";
    std::fs::write(sp.join(format!("black/linegen.{so}")), shim).unwrap();
    std::fs::write(sp.join("black/linegen.py"), LINEGEN).unwrap();
    // A C extension that is not of the group: its `.py` is not scanned.
    std::fs::write(sp.join(format!("black/other.{so}")), b"\x7fELF").unwrap();
    std::fs::write(sp.join("black/other.py"), "def visit_default():\n    pass\n").unwrap();
    // A module of the group that the process did not import: the distribution's RECORD lists
    // it, and it makes `linegen` of `black.linegen` the prefix (alone, it would be none).
    std::fs::write(sp.join(format!("black/__init__.{so}")), shim).unwrap();
    std::fs::create_dir_all(sp.join("black-24.10.0.dist-info")).unwrap();
    let record = format!(
        "30fcd23745efe32ce681__mypyc.{so},sha256=x,1\nblack/__init__.{so},sha256=x,1\nblack/linegen.{so},sha256=x,1\n\
         black/other.{so},sha256=x,1\nblack/linegen.py,sha256=x,1\n"
    );
    let m = |module: &str, file: &Path| trace_format::meta::ExtensionModule { module: module.into(), file: file.display().to_string() };
    let doc = ExtensionsDoc {
        modules: vec![
            m("30fcd23745efe32ce681__mypyc", &runtime),
            m("black.linegen", &sp.join(format!("black/linegen.{so}"))),
            m("black.other", &sp.join(format!("black/other.{so}"))),
        ],
    };
    let native = |name: &str, object: &Path| Function {
        language: Language::Native,
        name: name.into(),
        qualname: name.into(),
        object: Some(object.display().to_string()),
        ..Function::unknown(0)
    };
    let mut funcs = vec![
        native("CPyDef_linegen___LineGenerator___visit_default", &runtime),
        native("CPyDef_linegen___twice", &runtime),
        native("CPyPy_linegen___LineGenerator___visit_default", &runtime),
        native("CPyDef_linegen___transform_line", &sp.join("elsewhere.so")),
    ];
    let mut without_record = funcs.clone();
    assert_eq!(map_functions(&mut without_record, &doc), 0, "one imported module of the group: its prefix is none");
    std::fs::write(sp.join("black-24.10.0.dist-info/RECORD"), record).unwrap();
    assert_eq!(map_functions(&mut funcs, &doc), 1);
    assert_eq!(
        funcs[0],
        Function {
            language: Language::Python,
            name: "visit_default".into(),
            qualname: "LineGenerator.visit_default".into(),
            file: Some(sp.join("black/linegen.py")),
            first_line: Some(13),
            last_line: Some(17),
            object: Some(runtime.display().to_string()),
            program_library: false,
            inlined: false,
        }
    );
    assert!(ran_compiled(&funcs[0]));
    assert!(funcs[1..].iter().all(|f| f.language == Language::Native && !ran_compiled(f)), "{funcs:#?}");
}

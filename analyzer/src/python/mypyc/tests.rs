use super::scan::blank_strings_and_comments;
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

def two_lambdas(xs):
    key = lambda x: x  # a lambda
    return sorted(xs, key=lambda x: (
        x,
    ), reverse=True)

class Mode(Enum):
    A = "lambda: yield"

    def pretty(self) -> str:
        return "a"

class StringSplitter:
    def do_transform(self, line):
        def max_last_string_column() -> int:
            return 1
        yield max_last_string_column()

def make_factory(f=lambda: 0):
    def inner(x):
        def innermost():
            yield x
        return innermost
    return inner
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
    // Generators and coroutines: a `yield` in the def's own body, or `async def`.
    let generators: Vec<String> = defs.iter().filter(|d| d.generator).map(Def::qualname).collect();
    assert_eq!(
        generators,
        ["LineGenerator.visit_default", "transform_line", "StringSplitter.do_transform", "make_factory.<locals>.inner.<locals>.innermost"]
    );
}

#[test]
fn lambdas_are_found_in_their_scope_outside_strings_and_comments() {
    let found = scan(&lines(LINEGEN));
    let scope = |l: &Lambda| l.scope.map(|i| found.defs[i].qualname());
    let got: Vec<(Option<String>, u32, u32)> = found.lambdas.iter().map(|l| (scope(l), l.first_line, l.last_line)).collect();
    assert_eq!(
        got,
        [
            (Some("has___dunder".into()), 62, 62),
            (Some("two_lambdas".into()), 65, 65),
            // To the `,` after its parenthesized body.
            (Some("two_lambdas".into()), 66, 68),
            // A default is evaluated in the scope around the def: here the module's.
            (None, 82, 82),
        ]
    );
    // A one-line def's lambda may be its default's or its body's: it counts in both scopes.
    let found = scan(&lines("class K:\n    def f(self, g=1): return sorted(g, key=lambda v: -v)\n"));
    let scopes: Vec<Option<usize>> = found.lambdas.iter().map(|l| l.scope).collect();
    assert_eq!(scopes, [Some(0), None]);
    let blanked = blank_strings_and_comments(&lines(r#"x = 'a\'b' + """yield"""  # lambda"#));
    assert_eq!(blanked, [format!("x = {}+{}", " ".repeat(7), " ".repeat(22)).into_bytes()]);
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
    // A method of a nested class is not compiled by mypyc as one of the module's.
    assert_eq!(map.get("CPyDef_linegen___LineGenerator___Inner___visit_default"), None);
    // A generator's body runs in its generator class's helper: the generator's def.
    let body = |c: &str| got(c).map(|t| (t.qualname, t.first_line, t.last_line));
    assert_eq!(
        body("CPyDef_linegen___visit_default_LineGenerator_gen_____mypyc_generator_helper__"),
        Some(("LineGenerator.visit_default".into(), 13, 17))
    );
    assert_eq!(body("CPyDef_linegen___transform_line_gen_____mypyc_generator_helper__"), Some(("transform_line".into(), 32, 47)));
    assert_eq!(
        body("CPyDef_linegen___do_transform_StringSplitter_gen_____mypyc_generator_helper__"),
        Some(("StringSplitter.do_transform".into(), 77, 80))
    );
    // Not a generator: no helper.
    assert_eq!(map.get("CPyDef_linegen_____init___LineGenerator_gen_____mypyc_generator_helper__"), None);
    // A nested function is its callable class's `__call__`, named after the functions around it.
    assert_eq!(body("CPyDef_linegen____rhs_transform_line_obj_____call__"), Some(("transform_line.<locals>._rhs".into(), 42, 43)));
    assert_eq!(
        body("CPyDef_linegen___max_last_string_column_do_transform_StringSplitter_obj_____call__"),
        Some(("StringSplitter.do_transform.<locals>.max_last_string_column".into(), 78, 79))
    );
    assert_eq!(body("CPyDef_linegen___inner_make_factory_obj_____call__"), Some(("make_factory.<locals>.inner".into(), 83, 86)));
    let innermost = Some(("make_factory.<locals>.inner.<locals>.innermost".into(), 84, 85));
    assert_eq!(body("CPyDef_linegen___innermost_make_factory_inner_obj_____call__"), innermost);
    assert_eq!(body("CPyDef_linegen___innermost_make_factory_inner_gen_____mypyc_generator_helper__"), innermost);
    // A method of a class mypyc does not compile as an extension class (an Enum) is a
    // callable class too.
    assert_eq!(body("CPyDef_linegen___pretty_Mode_obj_____call__"), Some(("Mode.pretty".into(), 73, 74)));
    // A lambda, whatever its number, where its scope has one; `___` in the namespace is
    // `___3_` as everywhere.
    let lambda = |c: &str| lookup_key(c).and_then(|k| map.get(k.as_ref()).cloned());
    for n in ["0", "12"] {
        assert_eq!(
            lambda(&format!("CPyDef_linegen_____mypyc_lambda__{n}_has___3_dunder_obj_____call__")),
            Some(Some(Target {
                file: "/sp/black/linegen.py".into(),
                name: "<lambda>".into(),
                qualname: "has___dunder.<locals>.<lambda>".into(),
                first_line: 62,
                last_line: 62
            }))
        );
    }
    assert_eq!(
        lambda("CPyDef_linegen_____mypyc_lambda__3_obj_____call__").flatten().map(|t| (t.qualname, t.first_line)),
        Some(("<lambda>".into(), 82))
    );
    // Two lambdas in one scope: which number is which is not pinned; refused.
    assert_eq!(lambda("CPyDef_linegen_____mypyc_lambda__1_two_lambdas_obj_____call__"), Some(None));
    assert_eq!(lookup_key("CPyDef_m_____mypyc_lambda__1___mypyc_lambda__0_f_obj_____call__"), None, "a lambda in a lambda");
    assert_eq!(lookup_key("CPyDef_m___f").as_deref(), Some("CPyDef_m___f"));
}

/// mypyc's own names for the generator bodies, nested functions and lambdas of black 24.10.0
/// (from the symbol table of its wheel's `30fcd23745efe32ce681__mypyc` module), rebuilt
/// from the shapes of black's source around them.
#[test]
fn black_s_generator_nested_and_lambda_names_are_rebuilt() {
    let group = [
        Module { name: "pytree".into(), source: "/sp/blib2to3/pytree.py".into() },
        Module { name: "trans".into(), source: "/sp/black/trans.py".into() },
    ];
    let pytree = "class WildcardPattern(BasePattern):\n    def __init__(self, content=None):\n        if content is not None:\n            \
                  f = lambda s: tuple(s)\n            wrapped_content = tuple(map(f, content))\n\n    def generate_matches(self, nodes):\n        \
                  yield from self._iterative_matches(nodes)\n";
    let trans = "def hug_power_op(\n    line: Line, features: Collection[Feature], mode: Mode\n) -> Iterator[Line]:\n    \
                 def is_simple_lookup(index: int, kind: Literal[1, -1]) -> bool:\n        return True\n\n    \
                 def is_simple_operand(index: int) -> bool:\n        return is_simple_lookup(index, kind=1)\n\n    yield line\n";
    let map = name_map(&group, &mut |p: &Path| Some(lines(if p.ends_with("pytree.py") { pytree } else { trans })));
    let q = |c: &str| lookup_key(c).and_then(|k| map.get(k.as_ref()).cloned().flatten()).map(|t| (t.qualname, t.first_line, t.last_line));
    assert_eq!(
        q("CPyDef_pytree_____mypyc_lambda__0___3_init___3_WildcardPattern_obj_____call__"),
        Some(("WildcardPattern.__init__.<locals>.<lambda>".into(), 4, 4))
    );
    assert_eq!(
        q("CPyDef_pytree___generate_matches_WildcardPattern_gen_____mypyc_generator_helper__"),
        Some(("WildcardPattern.generate_matches".into(), 7, 8))
    );
    assert_eq!(q("CPyDef_trans___hug_power_op_gen_____mypyc_generator_helper__"), Some(("hug_power_op".into(), 1, 10)));
    assert_eq!(
        q("CPyDef_trans___is_simple_operand_hug_power_op_obj_____call__"),
        Some(("hug_power_op.<locals>.is_simple_operand".into(), 7, 8))
    );
    assert_eq!(
        q("CPyDef_trans___is_simple_lookup_hug_power_op_obj_____call__"),
        Some(("hug_power_op.<locals>.is_simple_lookup".into(), 4, 5))
    );
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
        native("CPyDef_linegen___visit_default_LineGenerator_gen_____mypyc_generator_helper__", &runtime),
    ];
    let mut without_record = funcs.clone();
    assert_eq!(map_functions(&mut without_record, &doc).0, 0, "one imported module of the group: its prefix is none");
    std::fs::write(sp.join("black-24.10.0.dist-info/RECORD"), record).unwrap();
    assert_eq!(map_functions(&mut funcs, &doc), (2, vec![4]));
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
            program_crate: false,
            dependency_crate: false,
            std_dependency: false,
            rust_symbol: false,
            made_in: None,
            inlined: false,
        }
    );
    assert!(ran_compiled(&funcs[0]));
    // The generator's body is the same Python function as the def that makes the generator.
    assert_eq!(funcs[4], funcs[0]);
    assert!(funcs[1..4].iter().all(|f| f.language == Language::Native && !ran_compiled(f)), "{funcs:#?}");
}

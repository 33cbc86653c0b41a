//! `trace`: the recorder. The program is the `tracer` library (tracer/src/lib.rs); this target
//! exists so that the workspace root is the package users install (`cargo install --path .`,
//! the pip wheel), with both `trace` and `slice`.

fn main() {
    tracer::main()
}

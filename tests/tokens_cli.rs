//! End-to-end test of `slice tokens`: counts files and standard input with both tokenizers.

use slice_trace_e2e::{bin, run, scratch, texts};
use std::io::Write;
use std::process::{Command, Stdio};

#[test]
fn counts_files_and_stdin_with_both_tokenizers() {
    let dir = scratch();
    let a = dir.path().join("a.txt");
    let b = dir.path().join("b.txt");
    std::fs::write(&a, "hello world").unwrap();
    std::fs::write(&b, "<|endoftext|>").unwrap();

    let o = run(Command::new(bin("slice")).args(["tokens", "--tokenizer", "cl100k"]).arg(&a));
    assert!(o.status.success(), "{:?}", texts(&o));
    assert_eq!(texts(&o).0, "2\n");

    // Special-token text counts as ordinary text: 7 tokens in cl100k_base (tiktoken's count).
    let o = run(Command::new(bin("slice")).args(["tokens", "--tokenizer", "cl100k_base"]).arg(&a).arg(&b));
    assert!(o.status.success(), "{:?}", texts(&o));
    assert_eq!(texts(&o).0, format!("2\t{}\n7\t{}\n", a.display(), b.display()));

    let mut child = Command::new(bin("slice"))
        .args(["tokens", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(b"hello world").unwrap();
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success(), "{:?}", texts(&o));
    assert_eq!(texts(&o).0, "2\n");

    let o = run(Command::new(bin("slice")).args(["tokens"]).arg(dir.path().join("missing.txt")));
    assert_eq!(o.status.code(), Some(1));
    assert!(texts(&o).1.contains("missing.txt"), "{:?}", texts(&o));
}

mod parse;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let total = parse::count_words(&args[1..].join(" "));
    println!("{total}");
}

fn usage() -> &'static str {
    "usage: words TEXT..."
}

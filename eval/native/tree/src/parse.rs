pub fn count_words(text: &str) -> usize {
    text.split_whitespace().filter(|w| is_word(w)).count()
}

fn is_word(w: &str) -> bool {
    w.chars().any(char::is_alphanumeric)
}

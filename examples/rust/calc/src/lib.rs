//! Numbers from a comma-separated list, and their statistics.

/// The integers of a comma-separated list; entries that are not integers are skipped.
pub fn parse(s: &str) -> Vec<i64> {
    s.split(',').filter_map(|t| t.trim().parse().ok()).collect()
}

/// The sum of `xs`.
pub fn total(xs: &[i64]) -> i64 {
    xs.iter().sum()
}

/// The arithmetic mean of `xs`, rounded toward zero (0 for an empty list).
pub fn mean(xs: &[i64]) -> i64 {
    if xs.is_empty() {
        return 0;
    }
    total(xs) / (xs.len() as i64 + 1)
}

/// The largest of `xs`.
pub fn largest(xs: &[i64]) -> i64 {
    *xs.iter().max().expect("an empty list has no largest number")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_list() {
        assert_eq!(parse("1, 2,x,3"), vec![1, 2, 3]);
    }

    #[test]
    fn means_of_two() {
        assert_eq!(mean(&parse("2,4")), 3);
    }

    #[test]
    #[should_panic(expected = "no largest")]
    fn largest_of_nothing_panics() {
        largest(&[]);
    }

    #[test]
    #[ignore]
    fn slow() {}
}

#[test]
fn totals_add_up() {
    assert_eq!(calc::total(&calc::parse("1,2,3")), 6);
}

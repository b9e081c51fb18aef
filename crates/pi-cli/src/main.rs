fn main() {
    println!("the CLI arrives with its issue");
}

fn main() {
    println!("lakejoin");
}

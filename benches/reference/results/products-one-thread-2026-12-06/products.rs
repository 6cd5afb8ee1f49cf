// One matrix product of gemm 0.19 (x86-v4 kernels, as the workspace's Cargo.toml
// has it) on one thread, on gemm's rayon threads (2), and split in two by rows
// with each half on one thread (rayon::in_place_scope), at the shapes of rlx's
// layers; threading threshold 0. Build: a fresh cargo project with
//   gemm = { version = "0.19", default-features = false, features = ["std", "rayon", "x86-v4"] }
//   gemm-common = (the same), rayon = "1.10"
// and this file as src/main.rs; cargo run --release. Output: products.txt, whose
// first block came from a first run with the shapes listed there (this file holds
// the second run's list).
use std::time::Instant;
fn prod(m: usize, k: usize, n: usize, a: &[f32], b: &[f32], dst: &mut [f32], par: gemm::Parallelism) {
    unsafe { gemm::gemm(m, n, k, dst.as_mut_ptr(), 1, n as isize, false, a.as_ptr(), 1, k as isize, b.as_ptr(), 1, n as isize, 0.0, 1.0, false, false, false, par) }
}
fn split(m: usize, k: usize, n: usize, a: &[f32], b: &[f32], dst: &mut [f32]) {
    let h = m / 2;
    let (d0, d1) = dst.split_at_mut(h * n);
    let mut r = None;
    rayon::in_place_scope(|s| {
        s.spawn(|_| { prod(m - h, k, n, &a[h * k..], b, d1, gemm::Parallelism::None); r = Some(()); });
        prod(h, k, n, a, b, d0, gemm::Parallelism::None);
    });
}
fn main() {
    gemm_common::gemm::set_threading_threshold(0);
    let shapes = [(512usize, 256usize, 256usize), (256, 512, 512), (64, 1600, 128), (256, 1600, 128), (32, 3136, 512), (512, 3136, 512), (12800, 32, 256), (256, 256, 7936), (2048, 256, 256), (32*400, 256, 32), (32*81, 512, 64)];
    for &(m, k, n) in &shapes {
        let a = vec![0.5f32; m * k]; let b = vec![0.25f32; k * n]; let mut d = vec![0.0f32; m * n];
        let macs = (m * k * n) as f64;
        let reps = ((4e9 / macs) as usize).clamp(3, 20000);
        let mut res = vec![];
        for mode in 0..3 {
            let run = |d: &mut [f32]| match mode { 0 => prod(m, k, n, &a, &b, d, gemm::Parallelism::None), 1 => prod(m, k, n, &a, &b, d, gemm::Parallelism::Rayon(2)), _ => split(m, k, n, &a, &b, d) };
            for _ in 0..3 { run(&mut d); }
            let t = Instant::now();
            for _ in 0..reps { run(&mut d); }
            let dt = t.elapsed().as_secs_f64() / reps as f64;
            res.push(format!("{:7.1} GF/s ({:8.1} us)", 2.0 * macs / dt / 1e9, dt * 1e6));
        }
        println!("{m}x{k}x{n}: single {} | gemm rayon2 {} | split {}", res[0], res[1], res[2]);
    }
}

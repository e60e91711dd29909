//! `kforge batch`: many tasks in one go.

pub mod slurm;

//! KernelBench task files.

"""Building and running generated C: the toolchain and its content-addressed cache, the runtime
(load a library, call its entry functions; importable without the rest of the compiler), BLAS
and GEMM autotuning."""

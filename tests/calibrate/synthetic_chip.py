"""A chip's numbers as the GEMM roofline of the kernel fits reads them, for fits of
synthetic tables (test_kernel_fit, test_surface_solve)."""


class SyntheticChip:
    """The spec numbers a GEMM roofline reads (SMs: A100's 108, whitepaper)."""
    n_sms = 108

    class hbm:
        bandwidth_bytes_per_s = 3e12

    @staticmethod
    def peak(dtype):
        return 1e15

/* One MKL code path on every x86-64 vendor (conf/numerics/pinned.yaml, docs/numerics.md).
 *
 * MKL chooses its kernels by instruction set and also by CPU vendor: on a CPU that is not Intel's it leaves the
 * code branch MKL_CBWR names and runs other sgemm and vector-math (exp, log, sqrt, erf ...) kernels, which round
 * differently. torch's libtorch_cpu.so carries MKL, which asks this one exported function whether the CPU is
 * Intel's. memlab.numerics loads this library into the process (RTLD_GLOBAL) before torch loads, so this
 * definition answers first: every CPU takes the branch MKL_CBWR names (AVX2, strict), as an Intel CPU does.
 * Nothing else is defined here; the Python module exists only so that the package build compiles the file. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

int mkl_serv_intel_cpu_true(void) { return 1; }

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_mkl_vendor",
                                    "MKL's vendor check, answered 'Intel' (see the C source).", -1, NULL};

PyMODINIT_FUNC PyInit__mkl_vendor(void) { return PyModule_Create(&module); }

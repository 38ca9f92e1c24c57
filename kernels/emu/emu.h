// emu.h — the C interface of the kernel emulation (emu_api.cc) for cgo.
#ifndef VOXTRAIN_EMU_H
#define VOXTRAIN_EMU_H

#ifdef __cplusplus
extern "C" {
#endif

// emu_launch runs the registered kernel name on a grid of blocks with
// cuLaunchKernel-style arguments: args[i] points at parameter i, whose kind
// params[i] ('p' pointer, 'i' int, 'f' float, 'd' double) must match the
// kernel's. It returns 0, or -1 with a message in err (errlen bytes).
int emu_launch(const char* name, const char* params, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
               unsigned by, unsigned bz, void** args, char* err, int errlen);

// emu_kernel_count and emu_kernel_name/params list the registered kernels.
int emu_kernel_count(void);
const char* emu_kernel_name(int i);
const char* emu_kernel_params(int i);

#ifdef __cplusplus
}
#endif

#endif

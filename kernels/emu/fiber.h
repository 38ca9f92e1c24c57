// fiber.h — the cooperative threads the emulation runs a block's CUDA
// threads on (fiber.cc).
#ifndef VOXTRAIN_EMU_FIBER_H
#define VOXTRAIN_EMU_FIBER_H

#include <cstddef>
#include <string>

namespace cuda_emu {

// What a thread arrives at the block barrier for.
enum Arrival { kSync = 1, kBlockEnd = 2 };

// Launch geometry as plain numbers (cuda_emu.h's dim3 is defined after the
// kernels' view of the world; fiber.cc needs only the counts).
struct Geometry {
    unsigned gx, gy, gz; // grid
    unsigned bx, by, bz; // block
};

// run_blocks runs body(ctx) once for every CUDA thread of every block of the
// grid, blocks one after another, each block's threads as fibers on the
// calling OS thread; it sets threadIdx, blockIdx, blockDim and gridDim for
// each. It returns "" or an error message. The geometry must be valid.
std::string run_blocks(const Geometry& g, void (*body)(void*), void* ctx);

// arrive suspends the calling CUDA thread at the block barrier until every
// thread of its block has arrived (for the same reason) or the block is
// abandoned because they arrived for different reasons.
void arrive(Arrival why);

} // namespace cuda_emu

#endif

// fiber.cc — a block's CUDA threads as fibers: cooperative threads, each on
// its own stack, switched on the calling OS thread.
//
// Why fibers: with one std::thread per CUDA thread, a launch of 256-thread
// blocks started 256 OS threads and every __syncthreads woke them all
// through a condition variable; the emulation spent most of its time in the
// kernel (clone, futex) rather than in the kernels. A fiber switch is a
// handful of register moves, so a launch costs about what its arithmetic
// does.
//
// Schedule: a block runs in rounds. In each round every thread runs until it
// arrives at the barrier — a __syncthreads() or the end of the kernel — and
// when all have arrived for the same reason the next round (or block)
// starts. Threads arriving for different reasons make the launch fail with
// "divergent __syncthreads". Rounds alternate the order threads run in
// (ascending, then descending; the first order alternates by block), so a
// kernel that reads another thread's shared-memory write without a barrier
// between them sees a stale value in one of the orders instead of happening
// to work.
//
// Context switch: hand-written for x86-64 System V (callee-saved registers,
// MXCSR and the x87 control word); elsewhere ucontext, portable but
// slower: glibc's getcontext and swapcontext each make a signal-mask
// system call, so every thread costs two per barrier round. Define
// VT_EMU_UCONTEXT to use ucontext on x86-64 too (to test that path).

// macOS declares the ucontext functions only under _XOPEN_SOURCE, which must
// come before the first system header.
#if defined(__APPLE__) && !defined(_XOPEN_SOURCE)
#define _XOPEN_SOURCE 700
#endif

#include "cuda_emu.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <vector>

#if defined(__x86_64__) && defined(__ELF__) && !defined(VT_EMU_UCONTEXT)
#define VT_EMU_ASM_SWITCH 1
#else
#include <ucontext.h>
#endif

namespace cuda_emu {
namespace {

// Stack bytes per fiber (virtual: only the pages a kernel touches are
// backed), and a guard page below each so an overflow faults instead of
// corrupting a neighbour. The kernels keep a few scalars and small arrays.
constexpr size_t kStackBytes = 64 << 10;

struct Stack {
    char* lo = nullptr; // lowest usable byte (above the guard page)
    size_t size = 0;
};

// Stacks are kept across launches: mapping 1024 stacks per launch would cost
// more than the launch.
std::mutex pool_mu;
std::vector<Stack> pool;

Stack take_stack()
{
    {
        std::lock_guard<std::mutex> lk(pool_mu);
        if (!pool.empty()) {
            Stack s = pool.back();
            pool.pop_back();
            return s;
        }
    }
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    void* m = mmap(nullptr, kStackBytes + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
    if (m == MAP_FAILED) {
        return Stack{};
    }
    if (mprotect(m, page, PROT_NONE) != 0) {
        munmap(m, kStackBytes + page);
        return Stack{}; // no guard page: an overflow would corrupt a neighbour
    }
    return Stack{(char*)m + page, kStackBytes};
}

void give_stacks(std::vector<Stack>& stacks)
{
    std::lock_guard<std::mutex> lk(pool_mu);
    for (const Stack& s : stacks) {
        if (s.lo != nullptr) {
            pool.push_back(s);
        }
    }
    stacks.clear();
}

#ifdef VT_EMU_ASM_SWITCH

// Context is a suspended fiber's stack pointer; its registers are saved on
// its stack by vt_emu_switch.
struct Context {
    void* sp = nullptr;
};

extern "C" void vt_emu_switch(void** save_sp, void* load_sp);
extern "C" void vt_emu_trampoline();

// vt_emu_switch(save, load) pushes the callee-saved registers, MXCSR and the
// x87 control word, stores the stack pointer in *save, loads load and pops
// the same from there. vt_emu_trampoline is where a new fiber first
// "returns" to: it calls r13(r12) with an aligned stack; the fiber function
// never returns (ud2 if it did).
asm(R"(
    .text
    .p2align 4
    .globl vt_emu_switch
    .hidden vt_emu_switch
    .type vt_emu_switch,@function
vt_emu_switch:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    subq $8, %rsp
    stmxcsr (%rsp)
    fnstcw 4(%rsp)
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    ldmxcsr (%rsp)
    fldcw 4(%rsp)
    addq $8, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
    .size vt_emu_switch, .-vt_emu_switch

    .p2align 4
    .globl vt_emu_trampoline
    .hidden vt_emu_trampoline
    .type vt_emu_trampoline,@function
vt_emu_trampoline:
    movq %r12, %rdi
    callq *%r13
    ud2
    .size vt_emu_trampoline, .-vt_emu_trampoline
)");

// start prepares c to run fn(arg) on s the first time it is switched to: a
// frame as vt_emu_switch leaves one, returning into the trampoline.
void start(Context& c, const Stack& s, void (*fn)(void*), void* arg)
{
    uintptr_t top = ((uintptr_t)(s.lo + s.size)) & ~(uintptr_t)15;
    auto* w = (uint64_t*)top;
    w[-1] = (uint64_t)(uintptr_t)&vt_emu_trampoline; // return address: after ret, rsp = top (16-aligned)
    w[-2] = 0;                                        // rbp
    w[-3] = 0;                                        // rbx
    w[-4] = (uint64_t)(uintptr_t)arg;                 // r12
    w[-5] = (uint64_t)(uintptr_t)fn;                  // r13
    w[-6] = 0;                                        // r14
    w[-7] = 0;                                        // r15
    uint32_t mxcsr;
    uint16_t fpcw;
    asm volatile("stmxcsr %0" : "=m"(mxcsr));
    asm volatile("fnstcw %0" : "=m"(fpcw));
    auto* fp = (uint32_t*)&w[-8];
    fp[0] = mxcsr;
    fp[1] = fpcw;
    c.sp = &w[-8];
}

inline void swap(Context& from, Context& to)
{
    vt_emu_switch(&from.sp, to.sp);
}

#else

struct Context {
    ucontext_t uc;
};

// makecontext passes int arguments only: the two halves of a pointer.
struct Entry {
    void (*fn)(void*);
    void* arg;
};

void entry(unsigned hi, unsigned lo)
{
    auto* e = (Entry*)(((uintptr_t)hi << 32) | (uintptr_t)lo);
    e->fn(e->arg);
    std::abort(); // fiber functions never return
}

thread_local std::vector<Entry> entries;

void start(Context& c, const Stack& s, void (*fn)(void*), void* arg)
{
    entries.push_back(Entry{fn, arg}); // reserved by the caller: never reallocates here
    getcontext(&c.uc);
    c.uc.uc_stack.ss_sp = s.lo;
    c.uc.uc_stack.ss_size = s.size;
    c.uc.uc_link = nullptr;
    const uintptr_t p = (uintptr_t)&entries.back();
    makecontext(&c.uc, (void (*)())entry, 2, (unsigned)(p >> 32), (unsigned)(p & 0xffffffffu));
}

inline void swap(Context& from, Context& to)
{
    swapcontext(&from.uc, &to.uc);
}

#endif

// Fiber is one CUDA thread of the running block.
struct Fiber {
    Context ctx;
    uint3 tid;
    Arrival why = kSync;
};

// Run is one launch in progress on this OS thread.
struct Run {
    void (*body)(void*);
    void* ctx;
    Context sched;
    std::vector<Fiber> fibers;
    size_t cur = 0;
};

thread_local Run* running = nullptr;

// fiber_main is every fiber's life: run the kernel body for a block, arrive
// at the block's end, and again for the next block. The scheduler abandons
// the fibers after the last block (their stacks hold nothing to destroy).
[[noreturn]] void fiber_main(void* p)
{
    Run* r = (Run*)p;
    for (;;) {
        r->body(r->ctx);
        arrive(kBlockEnd);
    }
}

} // namespace

void arrive(Arrival why)
{
    Run* r = running;
    if (r == nullptr) {
        std::fprintf(stderr, "cuda_emu: __syncthreads outside a kernel launch\n");
        std::abort();
    }
    Fiber& f = r->fibers[r->cur];
    f.why = why;
    swap(f.ctx, r->sched);
}

std::string run_blocks(dim3 grid, dim3 block, void (*body)(void*), void* ctx)
{
    const size_t nt = (size_t)block.x * block.y * block.z;
    Run r;
    r.body = body;
    r.ctx = ctx;
    r.fibers.resize(nt);
    std::vector<Stack> stacks;
    stacks.reserve(nt);
#ifndef VT_EMU_ASM_SWITCH
    entries.clear();
    entries.reserve(nt);
#endif
    std::string err;
    for (size_t t = 0; t < nt; t++) {
        stacks.push_back(take_stack());
        if (stacks.back().lo == nullptr) {
            give_stacks(stacks);
            return "cannot map emulation fiber stacks";
        }
        Fiber& f = r.fibers[t];
        f.tid = uint3{(unsigned)(t % block.x), (unsigned)((t / block.x) % block.y), (unsigned)(t / ((size_t)block.x * block.y))};
        start(f.ctx, stacks.back(), fiber_main, &r);
    }

    Run* outer = running;
    running = &r;
    blockDim = block;
    gridDim = grid;
    size_t nb = 0; // blocks run so far: their parity picks the first order
    for (unsigned z = 0; z < grid.z && err.empty(); z++) {
        for (unsigned y = 0; y < grid.y && err.empty(); y++) {
            for (unsigned x = 0; x < grid.x && err.empty(); x++, nb++) {
                blockIdx = uint3{x, y, z};
                for (size_t round = 0;; round++) {
                    const bool down = (nb + round) % 2 == 1;
                    for (size_t i = 0; i < nt; i++) {
                        r.cur = down ? nt - 1 - i : i;
                        Fiber& f = r.fibers[r.cur];
                        threadIdx = f.tid;
                        swap(r.sched, f.ctx);
                    }
                    const Arrival why = r.fibers[0].why;
                    bool same = true;
                    for (const Fiber& f : r.fibers) {
                        same = same && f.why == why;
                    }
                    if (!same) {
                        err = "divergent __syncthreads: threads of a block reached different barriers";
                        break;
                    }
                    if (why == kBlockEnd) {
                        break;
                    }
                }
            }
        }
    }
    running = outer;
    threadIdx = uint3{0, 0, 0};
    blockIdx = uint3{0, 0, 0};
    give_stacks(stacks);
    return err;
}

} // namespace cuda_emu

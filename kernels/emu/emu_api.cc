// emu_api.cc — the C interface (emu.h) over the emulation's kernel registry.
#include "emu.h"

#include <cstdio>
#include <iterator>
#include <mutex>

#include "cuda_emu.h"

namespace {

int fail(char* err, int errlen, const std::string& msg)
{
    std::snprintf(err, (size_t)errlen, "%s", msg.c_str());
    return -1;
}

const std::pair<const std::string, cuda_emu::Entry>* nth(int i)
{
    auto& r = cuda_emu::registry();
    if (i < 0 || (size_t)i >= r.size()) {
        return nullptr;
    }
    return &*std::next(r.begin(), i);
}

} // namespace

extern "C" int emu_launch(const char* name, const char* params, unsigned gx, unsigned gy, unsigned gz,
                          unsigned bx, unsigned by, unsigned bz, void** args, char* err, int errlen)
{
    auto& r = cuda_emu::registry();
    auto it = r.find(name);
    if (it == r.end()) {
        return fail(err, errlen, std::string("kernel ") + name + " is not registered in the emulation");
    }
    if (it->second.params != params) {
        return fail(err, errlen,
                    std::string("kernel ") + name + " takes parameters " + it->second.params + ", launched with " +
                        params);
    }
    // One launch at a time: __shared__ arrays are static storage.
    static std::mutex mu;
    std::lock_guard<std::mutex> lk(mu);
    std::string msg = it->second.run(dim3(gx, gy, gz), dim3(bx, by, bz), args);
    if (!msg.empty()) {
        return fail(err, errlen, std::string("kernel ") + name + ": " + msg);
    }
    return 0;
}

extern "C" int emu_kernel_count(void)
{
    return (int)cuda_emu::registry().size();
}

extern "C" const char* emu_kernel_name(int i)
{
    auto e = nth(i);
    return e ? e->first.c_str() : nullptr;
}

extern "C" const char* emu_kernel_params(int i)
{
    auto e = nth(i);
    return e ? e->second.params.c_str() : nullptr;
}

// libhwy.so (Highway 1.0, Debian 12) initializes a global of its nanobenchmark with
// hwy::platform::TimerResolution() when the library is loaded: 65,536 timer reads, about
// 3 ms of every fpguard process (4 to 5% of a merge; docs/scale.md, round 11), for a
// benchmark facility fpguard never uses. libhwy calls it through its PLT, so this
// definition, exported by the executable (CMakeLists.txt: --export-dynamic-symbol), takes
// its place. Nothing in fpguard measures with hwy's nanobenchmark; were something to, it
// would read a resolution of one tick.
#include <hwy/nanobenchmark.h>

namespace hwy::platform {

uint64_t TimerResolution() {
  return 1;
}

}  // namespace hwy::platform

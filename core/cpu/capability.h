// What every file in a cpu/ folder is compiled under. Each such .cpp is compiled once per CPU
// capability level (cmake/EmberCpuDispatch.cmake, core/cpu_capability.h), with
//   EMBER_CPU_LEVEL  the level's ember::CpuCapability as an integer (the slot it registers into)
//   EMBER_CPU_NS     a namespace name of its own (level_baseline, level_avx2, ...)
// and the level's -march. Everything a cpu/ header defines lives in
// ember::cpu::EMBER_CPU_NS (an inline namespace, so code names it ember::cpu::...): the copies of
// an inline function or template compiled for different levels then have different symbols, and
// the linker cannot keep an AVX-512 copy where baseline code calls it. The kernels themselves are
// in anonymous namespaces. Symbols a cpu/ file gets from other headers (std::, core/tensor.h) are
// the same in every level; the baseline objects come first on the link line, so the linker keeps
// their baseline copies (tests/scripts/check_cpu_dispatch_symbols.sh checks this).
#pragma once

#if !defined(EMBER_CPU_LEVEL) || !defined(EMBER_CPU_NS)
#error "core/cpu/ headers are for the .cpp files of a cpu/ folder, compiled once per CPU capability level"
#endif

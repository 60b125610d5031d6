// The seccomp filters, built with libseccomp. Not linked into dsh-confine:
// seccomp-gen runs this at build time and dsh-confine embeds the BPF it
// exported (seccomp_filters.h), because generating a filter at run time cost
// 0.2-0.4 ms of every confined start (issue 8). The unit tests run it again
// and compare the programs instruction for instruction.
#pragma once

#include <linux/filter.h>

#include <string>
#include <vector>

namespace dsh::seccomp_build {

// Every run: ioctl TIOCSTI and TIOCLINUX refused (EPERM), the command compared
// in its low 32 bits as the kernel reads it (CVE-2019-10063), on every x86 ABI.
// block_metadata (read-only mode): chmod/chown/utimes/xattr calls refused too,
// and on x86_64 the i386 and x32 ABIs refused with ENOSYS, because libseccomp
// cannot name the newest metadata calls there.
// Returns 0, or a negative errno with `step` naming what failed.
int program(bool block_metadata, std::vector<sock_filter>& out, std::string& step);

}  // namespace dsh::seccomp_build

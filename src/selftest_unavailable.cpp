// The self-test on hosts where it is not built yet (it drives the Linux
// runners' checks): a usage error that names the host, never a pass.
#include "selftest.hpp"

#include "errors.hpp"
#include "runner.hpp"

namespace dsh::selftest {

int run(const Request&) {
    Outcome o = failf(Err::Usage, "self-test is not built for {} yet", host_platform());
    print_error(o.text());
    return o.exit_status();
}

}  // namespace dsh::selftest

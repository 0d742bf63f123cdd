// Python's two string-formatting languages as templates use them: `fmt % args` (printf
// style: %s %r %d %i %f %e %g %x %o %c %%, flags, width, precision, %(name)s) and
// str.format ({} {0} {name} with !r/!s and a format spec [[fill]align][sign][0][width][.prec][type]).
#pragma once

#include "engine/jinja/value.h"

namespace tandem::jinja {

struct arguments;

value percent_format(const value& fmt, const value& args);
value brace_format(const value& fmt, const arguments& args);

}  // namespace tandem::jinja

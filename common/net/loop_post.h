// postToLoop: runs a function on the loop's next iteration. Senders use it
// to answer a request they can refuse at once (closed sender, bad name)
// without calling back from inside send(), which would re-enter the caller;
// CurlMulti to call a transfer's Done never from inside add().
#pragma once

#include <uv.h>

#include <functional>

namespace ductus::net {

// The callback runs once, on the loop; if the loop is closed first the
// function is never run (and is freed when the loop's handles are walked).
void postToLoop(uv_loop_t* loop, std::function<void()> fn);

}  // namespace ductus::net

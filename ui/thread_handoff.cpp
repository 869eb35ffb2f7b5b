// See thread_handoff.hpp.
#include "ui/thread_handoff.hpp"

namespace sdt::ui {

HandoffMutex& handoff_mutex() {
  static HandoffMutex mutex;
  return mutex;
}

}  // namespace sdt::ui

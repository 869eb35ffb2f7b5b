// Hand-overs between threads that ThreadSanitizer can see.
//
// Values cross threads in this app through Qt: a queued signal copies its arguments into an event that the other
// thread's event loop delivers, and QtConcurrent hands tasks to a pool thread and results back. Qt orders those
// with its own locks, which ThreadSanitizer cannot see unless Qt itself was built with it (distributions' Qt is
// not), so it would report every such hand-over as a data race and bury real races among them. Here the sender
// posts while holding a mutex and the receiver takes the same mutex once on arrival. The post happens inside the
// sender's critical section, so the receiver's lock always comes after it, and the mutex shows ThreadSanitizer the
// order that Qt already guarantees. The cost is one uncontended lock per message.
//
// Why not plain queued signals with suppressions (tests/ui/tsan.supp) instead: the accesses TSan would report are
// ours, not Qt's (the sender's code writes the value, the slot's code reads it), and only their order goes through
// Qt's locks (QMutex on a futex, not a pthread mutex TSan intercepts). called_from_lib cannot hide them, and a
// race: entry would have to name our own slots, which would hide real races in them too. Qt built with TSan would
// make this file unnecessary; distributions do not ship one.
#pragma once

#include <QFutureInterface>
#include <QFutureWatcher>
#include <QObject>
#include <QThreadPool>
#include <memory>
#include <mutex>
#include <utility>

namespace sdt::ui {

// Recursive: a post may, through a direct connection on the same thread, lead to another post.
using HandoffMutex = std::recursive_mutex;

// The app's hand-over lock (the log bridge has its own, see logging.cpp).
HandoffMutex& handoff_mutex();

// Runs `post` (an emit of a queued signal, a QtConcurrent::run) while holding `mutex`.
template <typename Post>
void post_handoff(Post&& post, HandoffMutex& mutex = handoff_mutex()) {
  std::lock_guard lock(mutex);
  std::forward<Post>(post)();
}

// Called first by whatever receives a hand-over on the other thread.
inline void receive_handoff(HandoffMutex& mutex = handoff_mutex()) {
  std::lock_guard lock(mutex);
}

// Runs `task()` on `pool` and then `done(result)` on `context`'s thread, unless `context` is gone by then (the
// watcher is its child). The task is handed over and its result handed back as above. QtConcurrent is not used:
// its task object is read by the pool thread before any code of ours runs there, so no lock of ours could order
// it; QThreadPool::start takes a plain function, and a QFutureInterface of our own reports the end.
template <typename Task, typename Done>
void run_in_pool(QThreadPool* pool, QObject* context, Task task, Done done) {
  using Result = decltype(task());
  auto result = std::make_shared<Result>();
  QFutureInterface<void> end;
  end.reportStarted();
  auto* watcher = new QFutureWatcher<void>(context);
  QObject::connect(watcher, &QFutureWatcher<void>::finished, context,
                   [watcher, result, done = std::move(done)]() mutable {
                     receive_handoff();
                     watcher->deleteLater();
                     done(std::move(*result));
                   });
  watcher->setFuture(end.future());
  post_handoff([&] {
    pool->start([task = std::move(task), result, end]() mutable {
      receive_handoff();
      Result value = task();
      post_handoff([&] { *result = std::move(value); });
      end.reportFinished();
    });
  });
}

}  // namespace sdt::ui

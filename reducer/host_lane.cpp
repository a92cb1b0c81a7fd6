#include "reducer/host_lane.hpp"

namespace gradcomm::reducer {

HostLane::HostLane() : thread_([this] { loop(); }) {}

HostLane::~HostLane() {
  wait_idle();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  work_.notify_one();
  thread_.join();
}

void HostLane::throw_error() {
  if (error_) std::rethrow_exception(error_);
}

void HostLane::push(std::function<void()> work) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    throw_error();
    queue_.push_back(std::move(work));
  }
  work_.notify_one();
}

void HostLane::drain() {
  if (std::this_thread::get_id() == thread_.get_id()) return;
  std::unique_lock<std::mutex> lock(mutex_);
  idle_.wait(lock, [this] { return head_ == queue_.size() && !busy_; });
  throw_error();
}

void HostLane::wait_idle() noexcept {
  if (std::this_thread::get_id() == thread_.get_id()) return;
  std::unique_lock<std::mutex> lock(mutex_);
  idle_.wait(lock, [this] { return head_ == queue_.size() && !busy_; });
}

void HostLane::loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    work_.wait(lock, [this] { return stop_ || head_ < queue_.size(); });
    if (head_ == queue_.size()) return;  // stop_, nothing left
    std::function<void()> work = std::move(queue_[head_++]);
    const bool skip = error_ != nullptr;
    busy_ = true;
    lock.unlock();
    if (!skip) {
      try {
        work();
      } catch (...) {
        lock.lock();
        error_ = std::current_exception();
        lock.unlock();
      }
    }
    work = nullptr;  // what it captured goes before the caller hears the queue is idle
    lock.lock();
    busy_ = false;
    if (head_ == queue_.size()) {
      queue_.clear();  // keeps the capacity
      head_ = 0;
      idle_.notify_all();
    }
  }
}

}  // namespace gradcomm::reducer

#include <memarea/error.hpp>

namespace memarea {
namespace {

class category final : public std::error_category {
 public:
  const char* name() const noexcept override { return "memarea"; }
  std::string message(int code) const override {
    return memarea_status_name(static_cast<memarea_status>(code));
  }
};

}  // namespace

const std::error_category& memarea_category() noexcept {
  static const category instance;
  return instance;
}

}  // namespace memarea

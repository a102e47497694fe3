// runtime/distributed/tcp_rendezvous.cpp — the rendezvous over one TCP address (Note
// [Rendezvous address] in rendezvous.hpp), and the choice between it and the file.
#include <fcntl.h>
#include <fmt/format.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#include "distributed/rendezvous.hpp"

namespace ferry::distributed {
namespace {

using Clock = std::chrono::steady_clock;

constexpr char kHello[8] = {'f', 'e', 'r', 'r', 'y', 'r', 'd', '1'};

// A socket, closed when it goes.
struct Socket {
  int fd = -1;
  Socket() = default;
  explicit Socket(int f) : fd(f) {}
  Socket(Socket&& o) noexcept : fd(o.fd) { o.fd = -1; }
  Socket& operator=(Socket&& o) noexcept {
    std::swap(fd, o.fd);
    return *this;
  }
  ~Socket() {
    if (fd >= 0) ::close(fd);
  }
};

int ms_left(Clock::time_point deadline) {
  const auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left <= 0 ? 0 : int(std::min<long long>(left, 1 << 30));
}

// Waits until `fd` is ready for `events` or the deadline passes (false).
bool ready(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    const int rc = ::poll(&p, 1, ms_left(deadline));
    if (rc > 0) return true;
    if (rc == 0) return false;
    if (errno != EINTR) return false;
  }
}

// Sends or receives all `n` bytes before the deadline; false on a timeout or a closed peer.
bool send_all(int fd, const void* data, std::size_t n, Clock::time_point deadline) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    if (!ready(fd, POLLOUT, deadline)) return false;
    const ssize_t k = ::send(fd, p, n, MSG_NOSIGNAL);
    if (k < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (k <= 0) return false;
    p += k;
    n -= std::size_t(k);
  }
  return true;
}
bool recv_all(int fd, void* data, std::size_t n, Clock::time_point deadline) {
  char* p = static_cast<char*>(data);
  while (n > 0) {
    if (!ready(fd, POLLIN, deadline)) return false;
    const ssize_t k = ::recv(fd, p, n, 0);
    if (k < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (k <= 0) return false;
    p += k;
    n -= std::size_t(k);
  }
  return true;
}

void put_u64(char* out, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) out[i] = char((v >> (56 - 8 * i)) & 0xff);
}
std::uint64_t get_u64(const char* in) {
  std::uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | std::uint8_t(in[i]);
  return v;
}

struct Address {
  std::string host, port;
};

// "tcp://HOST:PORT" (an IPv6 host in brackets), PORT in 1..65535.
Address parse(const std::string& spec) {
  const std::string rest = spec.substr(6);
  const std::size_t colon = rest.rfind(':');
  Address a;
  if (colon != std::string::npos) {
    a.host = rest.substr(0, colon);
    a.port = rest.substr(colon + 1);
  }
  if (a.host.size() > 2 && a.host.front() == '[' && a.host.back() == ']')
    a.host = a.host.substr(1, a.host.size() - 2);
  char* end = nullptr;
  const long port = a.port.empty() ? 0 : std::strtol(a.port.c_str(), &end, 10);
  if (a.host.empty() || a.port.empty() || *end != '\0' || port < 1 || port > 65535)
    throw ValueError(fmt::format(
        "distributed: the rendezvous address '{}' is not tcp://HOST:PORT (a port from 1 to "
        "65535, on rank 0's machine)",
        spec));
  return a;
}

std::vector<addrinfo*> resolve(const Address& a, bool passive, addrinfo** list) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = passive ? AI_PASSIVE : 0;
  const int rc = ::getaddrinfo(a.host.c_str(), a.port.c_str(), &hints, list);
  if (rc != 0)
    throw DistributedError(fmt::format("distributed: cannot resolve the rendezvous host {}: {}",
                                       a.host, ::gai_strerror(rc)));
  std::vector<addrinfo*> out;
  for (addrinfo* i = *list; i; i = i->ai_next) out.push_back(i);
  return out;
}

// One connection attempt, bounded by the deadline; an invalid socket where it failed.
Socket try_connect(const addrinfo& ai, Clock::time_point deadline) {
  Socket s(::socket(ai.ai_family, ai.ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai.ai_protocol));
  if (s.fd < 0) return Socket();
  if (::connect(s.fd, ai.ai_addr, ai.ai_addrlen) == 0) return s;
  if (errno != EINPROGRESS || !ready(s.fd, POLLOUT, deadline)) return Socket();
  int err = 0;
  socklen_t len = sizeof err;
  if (::getsockopt(s.fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0) return Socket();
  return s;
}

}  // namespace

std::string TcpRendezvous::exchange(const std::string& value) {
  const std::string& address = where_;
  const Address at = parse(address);
  const auto deadline = Clock::now() + timeout_;
  const double seconds = double(timeout_.count()) / 1000.0;
  addrinfo* list = nullptr;
  const std::vector<addrinfo*> candidates = resolve(at, place_.rank == 0, &list);
  struct Free {
    addrinfo* l;
    ~Free() { ::freeaddrinfo(l); }
  } free_list{list};

  if (place_.rank != 0) {
    // Rank 0 may not listen yet: try again until the deadline.
    for (;;) {
      for (const addrinfo* ai : candidates) {
        Socket s = try_connect(*ai, deadline);
        if (s.fd < 0) continue;
        char hello[24];
        std::memcpy(hello, kHello, 8);
        put_u64(hello + 8, std::uint64_t(place_.rank));
        put_u64(hello + 16, std::uint64_t(place_.size));
        char header[8];
        if (!send_all(s.fd, hello, sizeof hello, deadline) ||
            !recv_all(s.fd, header, sizeof header, deadline))
          continue;  // not rank 0 of this job (yet): try again
        const std::uint64_t n = get_u64(header);
        if (n > (1u << 20))
          throw DistributedError(fmt::format(
              "distributed: rank {}: the rendezvous at {} sent {} bytes; is another program "
              "listening there?",
              place_.rank, address, n));
        std::string got(n, '\0');
        if (!recv_all(s.fd, got.data(), n, deadline))
          throw DistributedError(fmt::format(
              "distributed: rank {}: the rendezvous at {} closed before sending rank 0's value",
              place_.rank, address));
        return got;
      }
      if (Clock::now() >= deadline)
        throw DistributedError(
            fmt::format("distributed: rank {} waited {:.1f} s for rank 0 to listen at {}",
                        place_.rank, seconds, address));
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }

  Socket listener;
  std::string why = "no address";
  for (const addrinfo* ai : candidates) {
    Socket s(::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol));
    if (s.fd < 0) continue;
    const int on = 1;
    ::setsockopt(s.fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
    if (::bind(s.fd, ai->ai_addr, ai->ai_addrlen) == 0 && ::listen(s.fd, place_.size) == 0) {
      listener = std::move(s);
      break;
    }
    why = std::strerror(errno);
  }
  if (listener.fd < 0)
    throw DistributedError(
        fmt::format("distributed: rank 0 cannot listen at {}: {}", address, why));
  std::vector<bool> served(std::size_t(place_.size), false);
  int left = place_.size - 1;
  char header[8];
  put_u64(header, value.size());
  while (left > 0) {
    // poll() with no time left still says "ready" while a connection waits: the deadline is
    // checked here too, or stray connections could keep rank 0 past it.
    if (Clock::now() >= deadline || !ready(listener.fd, POLLIN, deadline))
      throw DistributedError(fmt::format(
          "distributed: rank 0 waited {:.1f} s at {} for {} of the other {} ranks to connect",
          seconds, address, left, place_.size - 1));
    Socket peer(::accept4(listener.fd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
    if (peer.fd < 0) {
      // A connection that went away before it was taken, or a signal: the next one may do.
      // Anything else (no file descriptors left: EMFILE, ENFILE; no memory) stays while the
      // connection waits, and poll() would say "ready" again at once: rank 0 would spin until
      // its deadline and then blame the other ranks.
      const int e = errno;
      if (e == EINTR || e == ECONNABORTED || e == EAGAIN || e == EWOULDBLOCK || e == EPROTO ||
          e == EPERM)
        continue;
      throw DistributedError(fmt::format("distributed: rank 0 cannot accept connections at {}: {}",
                                         address, std::strerror(e)));
    }
    // A peer that says nothing (a port scan, a stray client) costs at most a second.
    const auto hello_by = std::min(deadline, Clock::now() + std::chrono::seconds(1));
    char hello[24];
    if (!recv_all(peer.fd, hello, sizeof hello, hello_by) || std::memcmp(hello, kHello, 8) != 0)
      continue;
    const std::uint64_t rank = get_u64(hello + 8), size = get_u64(hello + 16);
    if (size != std::uint64_t(place_.size) || rank == 0 || rank >= size)
      throw DistributedError(fmt::format(
          "distributed: a rank {} of {} joined the rendezvous at {}, where this job has {} "
          "ranks (two jobs on one address?)",
          rank, size, address, place_.size));
    if (served[rank])
      throw DistributedError(fmt::format(
          "distributed: rank {} joined the rendezvous at {} twice (two processes with one "
          "rank?)",
          rank, address));
    if (!send_all(peer.fd, header, sizeof header, deadline) ||
        !send_all(peer.fd, value.data(), value.size(), deadline))
      continue;  // it went away; it tries again while its time lasts
    served[rank] = true;
    --left;
  }
  return value;
}

std::unique_ptr<Rendezvous> make_rendezvous(const std::string& spec, JobPlace place,
                                            std::chrono::milliseconds timeout) {
  if (spec.rfind("tcp://", 0) == 0) return std::make_unique<TcpRendezvous>(spec, place, timeout);
  return std::make_unique<FileRendezvous>(spec, place, timeout);
}

}  // namespace ferry::distributed

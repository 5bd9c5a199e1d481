// The remote stage's pieces that need no server: URLs, S3 settings from the
// AWS variables and files, the manifest's checks, the disk cache's refusal
// to serve a damaged entry, the fetch pool's bounds, the part size of a
// multipart upload, the bound on fetched blocks in memory, the errors that
// readers waiting on one request share.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include "ptwm/base/error.hpp"
#include "ptwm/remote/block_memory.hpp"
#include "ptwm/remote/disk_cache.hpp"
#include "ptwm/remote/fetch_pool.hpp"
#include "ptwm/remote/http_client.hpp"
#include "ptwm/remote/manifest.hpp"
#include "ptwm/remote/remote_url.hpp"
#include "ptwm/remote/s3_config.hpp"
#include "ptwm/remote/uploader.hpp"

namespace fs = std::filesystem;
using namespace ptwm::remote;

namespace {

struct TempDir {
    fs::path path;
    TempDir() {
        std::string p = fs::temp_directory_path() / "ptwm-remote-unit-XXXXXX";
        path = ::mkdtemp(p.data());
    }
    ~TempDir() { fs::remove_all(path); }
};

// Sets AWS variables for one test and restores the environment after it.
struct AwsEnv {
    std::vector<std::pair<std::string, std::optional<std::string>>> saved;
    void set(const char* name, const std::string& value) {
        const char* old = getenv(name);
        saved.emplace_back(name, old ? std::optional<std::string>(old) : std::nullopt);
        setenv(name, value.c_str(), 1);
    }
    void unset(const char* name) {
        const char* old = getenv(name);
        saved.emplace_back(name, old ? std::optional<std::string>(old) : std::nullopt);
        unsetenv(name);
    }
    ~AwsEnv() {
        for (auto it = saved.rbegin(); it != saved.rend(); ++it)
            it->second ? setenv(it->first.c_str(), it->second->c_str(), 1) : unsetenv(it->first.c_str());
    }
    AwsEnv() {
        for (const char* v : {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_REGION",
                              "AWS_DEFAULT_REGION", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_PROFILE",
                              "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE"})
            unset(v);
    }
};

}  // namespace

TEST(RemoteUrl, ParsesS3AndHttp) {
    const auto s3 = parse_remote_url("s3://bucket/models/llama");
    ASSERT_TRUE(s3);
    EXPECT_TRUE(s3->is_s3());
    EXPECT_EQ(s3->bucket, "bucket");
    EXPECT_EQ(s3->path, "models/llama");
    EXPECT_EQ(s3->child("a b/x.ptwm").path, "models/llama/a b/x.ptwm");
    const auto web = parse_remote_url("https://host:8443/trees/llama/");
    ASSERT_TRUE(web);
    EXPECT_EQ(web->child("a b/x.ptwm").path, "https://host:8443/trees/llama/a%20b/x.ptwm");
    EXPECT_EQ(web->child("x.ptwm").leaf(), "x.ptwm");
    EXPECT_FALSE(parse_remote_url("/srv/ptwm/llama"));
    EXPECT_THROW(parse_remote_url("s3:///x"), ptwm::Error);
}

TEST(S3Config, VariablesThenProfileAndOverrides) {
    TempDir dir;
    AwsEnv env;
    std::ofstream(dir.path / "credentials") << "[default]\naws_access_key_id = DEF\naws_secret_access_key = defsecret\n"
                                            << "[other]\naws_access_key_id = OTH\naws_secret_access_key = othsecret\n";
    std::ofstream(dir.path / "config") << "[default]\nregion = eu-west-1\n"
                                       << "[profile other]\nregion = ap-south-1\ns3 =\n  addressing_style = path\n";
    env.set("AWS_SHARED_CREDENTIALS_FILE", dir.path / "credentials");
    env.set("AWS_CONFIG_FILE", dir.path / "config");

    S3Config c = S3Config::load({});
    EXPECT_EQ(c.access_key, "DEF");
    EXPECT_EQ(c.region, "eu-west-1");
    EXPECT_FALSE(c.path_style);
    EXPECT_EQ(c.object_url("b", "k/x y"), "https://b.s3.eu-west-1.amazonaws.com/k/x%20y");

    env.set("AWS_ACCESS_KEY_ID", "ENV");
    env.set("AWS_SECRET_ACCESS_KEY", "envsecret");
    env.set("AWS_REGION", "us-west-2");
    env.set("AWS_ENDPOINT_URL", "http://127.0.0.1:8333/");
    c = S3Config::load({});
    EXPECT_EQ(c.access_key, "ENV");
    EXPECT_EQ(c.region, "us-west-2");
    EXPECT_TRUE(c.path_style);
    EXPECT_EQ(c.object_url("b", "k"), "http://127.0.0.1:8333/b/k");

    // An explicit profile wins over the variables' keys, like `aws --profile`.
    S3Overrides o;
    o.profile = "other";
    o.region = "sa-east-1";
    c = S3Config::load(o);
    EXPECT_EQ(c.access_key, "OTH");
    EXPECT_EQ(c.secret_key, "othsecret");
    EXPECT_EQ(c.region, "sa-east-1");
}

TEST(Manifest, RoundTripsAndRejectsUnsafePaths) {
    Manifest m;
    m.entries.push_back({"sub", ManifestEntry::Kind::kDirectory, 0, 0, 0755, ""});
    m.entries.push_back({"sub/m.safetensors.ptwm", ManifestEntry::Kind::kStore, 123, 456, 0644, ""});
    m.entries.push_back({"sub/l", ManifestEntry::Kind::kLink, 0, 0, 0, "m.safetensors"});
    const std::string json = m.to_json();
    const Manifest back = Manifest::parse({reinterpret_cast<const uint8_t*>(json.data()), json.size()}, "m");
    ASSERT_EQ(back.entries.size(), 3u);
    EXPECT_EQ(back.entries[1].original_size, 456u);
    EXPECT_EQ(back.entries[2].target, "m.safetensors");
    for (const char* bad : {"../x", "/etc/passwd", "a/../../b", "a//b", ""}) {
        const std::string doc = std::string(R"({"format":"ptwmfs-manifest","version":1,"entries":[{"path":")") + bad +
                                R"(","kind":"file","mode":420,"size":1}]})";
        EXPECT_THROW(Manifest::parse({reinterpret_cast<const uint8_t*>(doc.data()), doc.size()}, "m"), ptwm::Error)
            << bad;
    }
    const std::string not_ours = "{\"hello\":1}";
    EXPECT_THROW(Manifest::parse({reinterpret_cast<const uint8_t*>(not_ours.data()), not_ours.size()}, "m"), ptwm::Error);
}

TEST(Manifest, RejectsAPathListedTwiceOrBelowALink) {
    // A link to somewhere outside, then a file of the same path or below
    // it: unpack would write through the link.
    const auto parse = [](const std::string& entries) {
        const std::string doc = R"({"format":"ptwmfs-manifest","version":1,"entries":[)" + entries + "]}";
        return Manifest::parse({reinterpret_cast<const uint8_t*>(doc.data()), doc.size()}, "m");
    };
    const std::string link = R"({"path":"w","kind":"link","target":"/tmp/elsewhere"})";
    try {
        parse(link + R"(,{"path":"w","kind":"file","mode":420,"size":1})");
        ADD_FAILURE() << "a path listed twice was taken";
    } catch (const ptwm::Error& e) {
        EXPECT_NE(std::string(e.what()).find("'w' is listed twice"), std::string::npos) << e.what();
    }
    try {
        parse(link + R"(,{"path":"w/x","kind":"file","mode":420,"size":1})");
        ADD_FAILURE() << "a file below a link was taken";
    } catch (const ptwm::Error& e) {
        EXPECT_NE(std::string(e.what()).find("'w/x' lies below 'w'"), std::string::npos) << e.what();
    }
    EXPECT_EQ(parse(R"({"path":"d","kind":"dir","mode":493},{"path":"d/x","kind":"file","mode":420,"size":1})")
                  .entries.size(),
              2u);
}

TEST(Manifest, RejectsWhatNoFileSystemHolds) {
    // A hand-edited manifest: each of these mounted and then failed a stat
    // or readlink with EIO, with no word of why. Refused at parse, naming
    // the entry.
    const auto error = [](const std::string& entry) -> std::string {
        const std::string doc = R"({"format":"ptwmfs-manifest","version":1,"entries":[)" + entry + "]}";
        try {
            Manifest::parse({reinterpret_cast<const uint8_t*>(doc.data()), doc.size()}, "m");
        } catch (const ptwm::Error& e) {
            return e.what();
        }
        return "(taken)";
    };
    const std::string name_255(255, 'n'), name_256(256, 'n');
    EXPECT_EQ(error(R"({"path":"d/)" + name_255 + R"(","kind":"file","mode":420,"size":1})"), "(taken)");
    EXPECT_NE(error(R"({"path":"d/)" + name_256 + R"(","kind":"file","mode":420,"size":1})").find("holds a name of more than 255 bytes"),
              std::string::npos);
    for (const char* size : {"-1", "9223372036854775808", "1.5", "\"1\""}) {
        const std::string store = R"({"path":"m.ptwm","kind":"store","mode":420,"size":1,"original_size":)" + std::string(size) + "}";
        EXPECT_NE(error(store).find("'m.ptwm': original_size " + std::string(size) + " is not a size a file can have"),
                  std::string::npos)
            << error(store);
    }
    EXPECT_EQ(error(R"({"path":"m.ptwm","kind":"store","mode":420,"size":1,"original_size":9223372036854775807})"), "(taken)");
    for (const std::string& target : {std::string(), std::string(4096, 't')})
        EXPECT_NE(error(R"({"path":"l","kind":"link","target":")" + target + R"("})").find("'l': a link target must be 1 to 4095 bytes"),
                  std::string::npos)
            << target.size();
    EXPECT_EQ(error(R"({"path":"l","kind":"link","target":")" + std::string(4095, 't') + R"("})"), "(taken)");
}

TEST(DiskCache, ServesWhatWasPutAndNeverADamagedEntry) {
    TempDir dir;
    auto stats = std::make_shared<RemoteStats>();
    DiskCache cache({dir.path.string(), 1 << 20}, stats);
    std::vector<uint8_t> bytes(5000);
    for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i * 31);
    cache.put("block a", bytes);
    EXPECT_EQ(cache.get("block a"), bytes);
    EXPECT_FALSE(cache.get("block b"));

    // One flipped payload byte: rejected, removed, a miss.
    const std::string file = cache.path_of("block a");
    {
        std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
        f.seekp(-100, std::ios::end);
        f.put('\x5a' ^ static_cast<char>(bytes[bytes.size() - 100]));
    }
    EXPECT_FALSE(cache.get("block a"));
    EXPECT_FALSE(fs::exists(file));
    EXPECT_EQ(stats->cache_rejected.load(), 1u);

    // A torn entry (cut short) is rejected too.
    cache.put("block a", bytes);
    fs::resize_file(file, fs::file_size(file) - 1);
    EXPECT_FALSE(cache.get("block a"));

    // Survives a restart: a second cache over the same directory finds it.
    cache.put("block c", bytes);
    DiskCache again({dir.path.string(), 1 << 20}, stats);
    EXPECT_EQ(again.get("block c"), bytes);
}

TEST(DiskCache, EvictsLeastRecentlyUsedBeyondItsBound) {
    TempDir dir;
    auto stats = std::make_shared<RemoteStats>();
    DiskCache cache({dir.path.string(), 100 * 1024}, stats);
    const std::vector<uint8_t> block(20 * 1024, 7);
    for (int i = 0; i < 4; ++i) cache.put("b" + std::to_string(i), block);
    // Make b0 the most recently used, then overflow the bound.
    fs::last_write_time(cache.path_of("b1"), fs::file_time_type::clock::now() - std::chrono::hours(3));
    fs::last_write_time(cache.path_of("b2"), fs::file_time_type::clock::now() - std::chrono::hours(2));
    fs::last_write_time(cache.path_of("b3"), fs::file_time_type::clock::now() - std::chrono::hours(1));
    ASSERT_TRUE(cache.get("b0"));
    for (int i = 4; i < 6; ++i) cache.put("b" + std::to_string(i), block);
    EXPECT_TRUE(cache.get("b0"));
    EXPECT_FALSE(fs::exists(cache.path_of("b1")));
    uint64_t total = 0;
    for (const auto& e : fs::directory_iterator(dir.path)) total += e.file_size();
    EXPECT_LE(total, 100u * 1024);
}

// FetchPool: every queued job runs; the queue is bounded, and a full queue
// refuses (the reader then fetches itself) instead of growing.
TEST(FetchPool, RunsQueuedJobsAndRefusesWhenFull) {
    struct Shared {
        std::mutex mutex;
        std::condition_variable changed;
        int ran = 0;
        bool released = false;
    };
    auto shared = std::make_shared<Shared>();
    auto& pool = FetchPool::shared();
    for (int i = 0; i < 4; ++i)
        ASSERT_TRUE(pool.try_submit([shared] {
            std::lock_guard lock(shared->mutex);
            ++shared->ran;
            shared->changed.notify_all();
        }, 1));
    {
        std::unique_lock lock(shared->mutex);
        ASSERT_TRUE(shared->changed.wait_for(lock, std::chrono::seconds(10), [&] { return shared->ran == 4; }));
    }
    // One thread held by a job that waits: the queue takes a few, then refuses.
    ASSERT_TRUE(pool.try_submit([shared] {
        std::unique_lock lock(shared->mutex);
        shared->changed.wait(lock, [&] { return shared->released; });
    }, 1));
    int accepted = 0;
    for (int i = 0; i < 16; ++i)
        if (pool.try_submit([shared] {}, 1)) ++accepted;
    EXPECT_GE(accepted, 3);
    EXPECT_LE(accepted, 4);
    {
        std::lock_guard lock(shared->mutex);
        shared->released = true;
        shared->changed.notify_all();
    }
}

TEST(Uploader, PartSizeKeepsAnUploadWithinTenThousandParts) {
    constexpr uint64_t MiB = 1ull << 20, GiB = 1ull << 30;
    const auto parts = [](uint64_t size, uint64_t part) { return (size + part - 1) / part; };
    // Within 10,000 parts: the part size asked for, even one not a whole MiB.
    EXPECT_EQ(multipart_part_bytes(10000 * 5 * MiB, 5 * MiB), 5 * MiB);
    EXPECT_EQ(multipart_part_bytes(100 * GiB, 16 * MiB), 16 * MiB);  // 6,400 parts
    EXPECT_EQ(multipart_part_bytes(40 * GiB, 5 * MiB + 1), 5 * MiB + 1);
    // One byte more, or 50 GiB at 5 MiB (10,240 parts): the next whole MiB.
    EXPECT_EQ(multipart_part_bytes(10000 * 5 * MiB + 1, 5 * MiB), 6 * MiB);
    EXPECT_EQ(multipart_part_bytes(50 * GiB, 5 * MiB), 6 * MiB);
    EXPECT_EQ(multipart_part_bytes(1000 * GiB, 16 * MiB), 103 * MiB);  // 102.4 MiB at 10,000 parts
    // Whatever the size: at most 10,000 parts, and when raised, the least
    // whole number of MiB that is.
    for (uint64_t size = 49 * GiB; size < 60 * GiB; size += 7 * MiB + 12345)
        for (const uint64_t wanted : {5 * MiB, 5 * MiB + 7, 8 * MiB}) {
            const uint64_t part = multipart_part_bytes(size, wanted);
            ASSERT_LE(parts(size, part), 10000u) << size;
            if (part != wanted) {
                ASSERT_EQ(part % MiB, 0u) << size;
                ASSERT_GT(part, wanted) << size;
                ASSERT_GT(parts(size, part - MiB), 10000u) << size;
            }
        }
    // 5 GiB parts, S3's largest, hold 10,000 x 5 GiB and not a byte more.
    EXPECT_EQ(multipart_part_bytes(10000 * 5 * GiB, 5 * MiB), 5 * GiB);
    EXPECT_THROW(multipart_part_bytes(10000 * 5 * GiB + 1, 5 * MiB), ptwm::Error);
}

namespace {
BlockMemory::Block block_of(size_t bytes, uint8_t fill) {
    return std::make_shared<const std::vector<uint8_t>>(bytes, fill);
}
}  // namespace

// A failed request's error, shared with the readers that waited on it,
// reaches each as its own class: ObjectChanged is not logged again per
// read, a transient failure is tried again by the next read.
TEST(SharedError, KeepsRemoteErrorsStatusAndTransience) {
    auto shared = [](auto thrown) {
        try {
            throw thrown;
        } catch (...) {
            return ptwm::SharedError::current();
        }
    };
    try {
        shared(RemoteError("s3://m/a.ptwm: GET: 503 Slow Down", 503, true)).raise();
    } catch (const ObjectChanged&) {
        ADD_FAILURE() << "a RemoteError came back as ObjectChanged";
    } catch (const RemoteError& e) {
        EXPECT_STREQ(e.what(), "s3://m/a.ptwm: GET: 503 Slow Down");
        EXPECT_EQ(e.status(), 503);
        EXPECT_TRUE(e.transient());
    }
    try {
        shared(RemoteError("s3://m/a.ptwm: HTTP 404 NoSuchBucket: no such bucket", 404, false, "NoSuchBucket")).raise();
    } catch (const RemoteError& e) {
        EXPECT_EQ(e.code(), "NoSuchBucket");
        EXPECT_FALSE(e.object_missing()) << "a missing bucket taken for a missing object";
    }
    EXPECT_TRUE(RemoteError("s3://m/a.ptwm: HTTP 404 NoSuchKey: no such object", 404, false, "NoSuchKey").object_missing());
    EXPECT_TRUE(RemoteError("https://h/a.ptwm: HTTP 404: no such object", 404, false).object_missing());
    try {
        shared(ObjectChanged("s3://m/a.ptwm: the object changed")).raise();
    } catch (const ObjectChanged& e) {
        EXPECT_STREQ(e.what(), "s3://m/a.ptwm: the object changed");
        EXPECT_EQ(e.status(), 412);
        EXPECT_FALSE(e.transient());
    } catch (...) {
        ADD_FAILURE() << "ObjectChanged came back as another class";
    }
}

// A request that cannot reach its server names the host and port it went
// to: for s3:// that is BUCKET.ENDPOINT or ENDPOINT, which the user's URL
// does not show.
TEST(HttpClient, AConnectionRefusedNamesTheHostItWentTo) {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    ASSERT_GE(fd, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
    ::close(fd);  // bound and closed: a port nothing listens on
    const std::string host = "127.0.0.1:" + std::to_string(ntohs(addr.sin_port));
    HttpClient client(std::nullopt, RetryPolicy{0.3, 0.05, 0.1});
    HttpRequest req;
    req.method = "HEAD";
    req.url = "http://" + host + "/models/a.ptwm";
    req.what = "s3://models/a.ptwm";
    try {
        client.send(req);
        ADD_FAILURE() << "a request to a closed port succeeded";
    } catch (const RemoteError& e) {
        EXPECT_NE(std::string(e.what()).find("s3://models/a.ptwm: HEAD failed"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("(" + host + ")"), std::string::npos) << e.what();
        EXPECT_TRUE(e.transient());
    }
}

// A host name the resolver says does not exist fails at once, as an
// unreachable server (transient: a mount serves its disk cache), instead of
// being retried for all of remote_timeout: a mistyped endpoint or bucket
// waited 60 s to be told so.
TEST(HttpClient, AHostNameThatDoesNotExistFailsAtOnce) {
    const char* host = "no-such-host.invalid";  // RFC 6761: never resolves
    addrinfo* found = nullptr;
    const int rc = ::getaddrinfo(host, nullptr, nullptr, &found);
    if (found) ::freeaddrinfo(found);
    if (rc != EAI_NONAME)
        GTEST_SKIP() << "this machine's resolver does not answer that " << host << " does not exist (" << gai_strerror(rc)
                     << "): nothing to test";
    HttpClient client(std::nullopt, RetryPolicy{30, 0.05, 0.1});
    HttpRequest req;
    req.method = "HEAD";
    req.url = std::string("http://") + host + ":8333/models/a.ptwm";
    req.what = "s3://models/a.ptwm";
    const auto start = std::chrono::steady_clock::now();
    try {
        client.send(req);
        ADD_FAILURE() << "a request to " << host << " succeeded";
    } catch (const RemoteError& e) {
        EXPECT_NE(std::string(e.what()).find(std::string("(") + host + ":8333): the resolver says no such name"),
                  std::string::npos) << e.what();
        EXPECT_TRUE(e.transient());
    }
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 10)
        << "retried until the 30 s deadline";
}

TEST(BlockMemory, KeepsTheMostRecentlyUsedWithinItsLimit) {
    BlockMemory memory(3000);
    std::weak_ptr<const std::vector<uint8_t>> first, second, third;
    {
        auto a = block_of(1000, 1), b = block_of(1000, 2), c = block_of(1000, 3);
        first = a, second = b, third = c;
        memory.keep(1, 0, a);
        memory.keep(1, 1, b);
        memory.keep(2, 0, c);  // another source's block
    }
    EXPECT_EQ(memory.bytes(), 3000u);
    EXPECT_FALSE(first.expired());  // held by the memory alone
    memory.keep(1, 0, first.lock());  // used again: now the most recent
    memory.keep(3, 7, block_of(1000, 4));
    EXPECT_EQ(memory.bytes(), 3000u);
    EXPECT_TRUE(second.expired()) << "the least recently used block is freed";
    EXPECT_FALSE(first.expired());
    EXPECT_FALSE(third.expired());
    memory.drop(2, 0);
    EXPECT_TRUE(third.expired());
    EXPECT_EQ(memory.bytes(), 2000u);
    memory.drop(2, 0);  // not kept: nothing happens
    EXPECT_EQ(memory.bytes(), 2000u);
}

TEST(BlockMemory, ABlockInUseOutlivesItsEvictionAndTheLimitOnlyGrows) {
    BlockMemory memory(1500);
    auto reading = block_of(1000, 1);  // a read still copying from it
    memory.keep(1, 0, reading);
    memory.keep(1, 1, block_of(1000, 2));
    EXPECT_EQ(memory.bytes(), 1000u);
    EXPECT_EQ((*reading)[999], 1) << "evicted, and still whole for its reader";
    memory.keep(1, 2, block_of(5000, 3));  // larger than the limit: kept alone
    EXPECT_EQ(memory.bytes(), 5000u);
    memory.require(1000);
    EXPECT_EQ(memory.limit(), 1500u);
    memory.require(8000);
    EXPECT_EQ(memory.limit(), 8000u);
    EXPECT_NE(BlockMemory::new_source(), BlockMemory::new_source());
}

TEST(BlockMemoryDeath, SharedOneOutlivesExitForDetachedFetchThreads) {
    // FetchPool's threads are detached and outlive main: a fetch-ahead that
    // ends while the process exits (a mount unmounted mid-read) remembers
    // its blocks, and a source it held last drops them, in BlockMemory. The
    // shared one was a function-local static, destroyed by exit() under
    // such a thread (ASan: heap-use-after-free in the map's buckets).
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    EXPECT_EXIT(
        {
            std::atomic<bool> started{false};
            std::thread([&started] {
                const uint64_t source = BlockMemory::new_source();
                for (uint64_t i = 0;; ++i) {
                    BlockMemory::shared().keep(source, i % 64, block_of(4096, 1));
                    BlockMemory::shared().drop(source, (i + 32) % 64);
                    started.store(true);
                }
            }).detach();
            while (!started.load()) std::this_thread::yield();
            std::exit(0);
        },
        ::testing::ExitedWithCode(0), "");
}

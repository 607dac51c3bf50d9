// The credential wrapping of a run's etcd records (rdzv/record_auth.h),
// with a fake MUNGE: who may write what, and that a refusal is counted once.
#include "record_auth.h"

#include <gtest/gtest.h>

#include "fake_credential.h"

namespace ltd {
namespace {

using rdzv::RecordAuth;
using test::FakeCodec;

constexpr uid_t kOwner = 1000;
constexpr uid_t kOther = 2000;
const std::string kKey = "/ltd/runs/r1/attempts/0/report/1";

etcd::KeyValue Kv(const std::string& key, std::string value, int64_t rev = 7) {
  etcd::KeyValue kv;
  kv.key = key;
  kv.value = std::move(value);
  kv.mod_revision = rev;
  return kv;
}

// A reader of the owner's run, and what it was told of refusals.
struct Reader {
  std::shared_ptr<std::atomic<int>> decodes = std::make_shared<std::atomic<int>>(0);
  RecordAuth auth{std::make_unique<FakeCodec>(kOwner, decodes), kOwner};
  int told = 0;
  int logged = 0;
  std::string line;
  Reader() {
    auth.OnRefused([this](int64_t total, const std::string& l, bool log) {
      told = static_cast<int>(total);
      logged += log ? 1 : 0;
      line = l;
    });
  }
};

TEST(RecordAuth, TheOwnersRecordHolds) {
  RecordAuth writer(std::make_unique<FakeCodec>(kOwner), kOwner);
  auto sealed = writer.Seal(kKey, R"({"kind":"primary"})");
  ASSERT_TRUE(sealed.ok()) << sealed.status();
  EXPECT_EQ(sealed->rfind("MUNGE:", 0), 0u);
  Reader r;
  auto value = r.auth.Open(Kv(kKey, *sealed));
  ASSERT_TRUE(value.has_value());
  EXPECT_EQ(*value, R"({"kind":"primary"})");
  EXPECT_EQ(r.auth.refused(), 0);
}

TEST(RecordAuth, RootsSupervisorSpeaksForTheOwnerOnly) {
  // lt-shim runs as root: its credential is root's, the job's uid inside.
  RecordAuth for_owner(std::make_unique<FakeCodec>(0), kOwner);
  RecordAuth for_other(std::make_unique<FakeCodec>(0), kOther);
  Reader r;
  EXPECT_TRUE(r.auth.Open(Kv(kKey, *for_owner.Seal(kKey, "x"))).has_value());
  EXPECT_FALSE(r.auth.Open(Kv(kKey, *for_other.Seal(kKey, "x"), 8)).has_value());
  EXPECT_EQ(r.auth.refused(), 1);
  EXPECT_NE(r.line.find("uid 0 for uid 2000"), std::string::npos) << r.line;
}

TEST(RecordAuth, AUidSpelledOtherwiseThanAFrameIsNoRecord) {
  // A credential of the owner's or root's whose payload names the owner's
  // uid in another spelling: leading zeros, or a number past 32 bits that
  // wraps to it (2^32 + 1000). Only Frame's own spelling holds.
  Reader r;
  FakeCodec root(0), owner(kOwner);
  const std::string rest = "\n" + kKey + "\nx";
  int64_t rev = 1;
  for (FakeCodec* writer : {&root, &owner}) {
    EXPECT_TRUE(r.auth.Open(Kv(kKey, *writer->Encode("ltd-rdzv 1\n1000" + rest), rev++)));
    for (const std::string uid : {"01000", "4294968296", "+1000", "1000 ", "4294967295"}) {
      EXPECT_FALSE(r.auth.Open(Kv(kKey, *writer->Encode("ltd-rdzv 1\n" + uid + rest), rev++)))
          << uid;
      EXPECT_NE(r.line.find("holds no ltd record"), std::string::npos) << uid << ": " << r.line;
    }
  }
  EXPECT_EQ(r.auth.refused(), 10);
}

TEST(RecordAuth, ARefusalOfAKeyWithControlsIsOneLine) {
  // Anyone who reaches etcd picks the key: the line logged and kept in the
  // job's record must not forge a log line or color a terminal.
  Reader r;
  const std::string key = "/ltd/runs/r1/\n[2026-12-07 00:00:00.000] [info] forged\x1b[31m";
  EXPECT_FALSE(r.auth.Open(Kv(key, "plain")).has_value());
  ASSERT_EQ(r.told, 1);
  EXPECT_EQ(r.line.find('\n'), std::string::npos) << r.line;
  EXPECT_EQ(r.line.find('\x1b'), std::string::npos) << r.line;
  EXPECT_NE(r.line.find("\\n[2026-12-07"), std::string::npos) << r.line;
}

TEST(RecordAuth, AnotherUsersRecordIsRefusedCountedAndLoggedOnce) {
  // Another user's ltrun: their own credential, their own uid inside.
  RecordAuth other(std::make_unique<FakeCodec>(kOther), kOther);
  // Another user claiming to write for the owner: the credential says who.
  RecordAuth liar(std::make_unique<FakeCodec>(kOther), kOwner);
  Reader r;
  EXPECT_FALSE(r.auth.Open(Kv(kKey, *other.Seal(kKey, "x"), 7)).has_value());
  EXPECT_FALSE(r.auth.Open(Kv(kKey, *liar.Seal(kKey, "x"), 8)).has_value());
  EXPECT_EQ(r.auth.refused(), 2);
  EXPECT_EQ(r.told, 2);
  EXPECT_EQ(r.logged, 1);  // once per key
  EXPECT_NE(r.line.find("written by uid 2000"), std::string::npos) << r.line;
  EXPECT_NE(r.line.find(kKey), std::string::npos) << r.line;
  // Read again (a poll, a watch event): neither decoded nor counted again.
  const int decodes = *r.decodes;
  EXPECT_FALSE(r.auth.Open(Kv(kKey, *liar.Seal(kKey, "x"), 8)).has_value());
  EXPECT_EQ(*r.decodes, decodes);
  EXPECT_EQ(r.auth.refused(), 2);
}

TEST(RecordAuth, ARecordMovedToAnotherKeyIsRefused) {
  RecordAuth writer(std::make_unique<FakeCodec>(kOwner), kOwner);
  const std::string node0 = "/ltd/runs/r1/attempts/0/report/0";
  Reader r;
  // Node 0's genuine report, copied under node 1's key, or another run's.
  EXPECT_FALSE(r.auth.Open(Kv(kKey, *writer.Seal(node0, "x"))).has_value());
  EXPECT_FALSE(
      r.auth.Open(Kv("/ltd/runs/r2/attempts/0/report/1", *writer.Seal(kKey, "x"))).has_value());
  EXPECT_EQ(r.auth.refused(), 2);
  EXPECT_NE(r.line.find("another key"), std::string::npos) << r.line;
}

TEST(RecordAuth, PlainForgedAndExpiredValuesAreRefused) {
  Reader r;
  // The report of the issue, written straight into etcd.
  EXPECT_FALSE(r.auth.Open(Kv(kKey, R"({"kind":"primary","cause":{"exit_code":42}})", 1)));
  EXPECT_NE(r.line.find("not a MUNGE credential"), std::string::npos) << r.line;
  EXPECT_FALSE(r.auth.Open(Kv(kKey, "MUNGE:garbage", 2)));
  EXPECT_FALSE(r.auth.Open(Kv(kKey, "MUNGE:FAKE:expired:whatever", 3)));
  EXPECT_NE(r.line.find("expired"), std::string::npos) << r.line;
  // A credential of the owner over something that is no ltd record.
  EXPECT_FALSE(r.auth.Open(Kv(kKey, FakeCodec::Make(kOwner, "hello"), 4)));
  EXPECT_EQ(r.auth.refused(), 4);
}

TEST(RecordAuth, NoneBelievesEveryValueAsItIs) {
  RecordAuth none(nullptr, kOwner);
  EXPECT_FALSE(none.on());
  EXPECT_EQ(*none.Seal(kKey, "x"), "x");
  EXPECT_EQ(*none.Open(Kv(kKey, "forged")), "forged");
  EXPECT_EQ(none.refused(), 0);
}

TEST(RecordAuth, Modes) {
  EXPECT_TRUE(rdzv::CheckRdzvAuth("munge").ok());
  EXPECT_TRUE(rdzv::CheckRdzvAuth("none").ok());
  EXPECT_TRUE(rdzv::CheckRdzvAuth("auto").ok());
  auto bad = rdzv::CheckRdzvAuth("kerberos");
  EXPECT_EQ(bad.message(), "--rdzv-auth 'kerberos' is not munge, none or auto; give one of them");
  EXPECT_EQ(rdzv::ResolveRdzvAuth("none", "/nonexistent"), "none");
  EXPECT_EQ(rdzv::ResolveRdzvAuth("munge", "/nonexistent"), "munge");
  EXPECT_EQ(rdzv::ResolveRdzvAuth("auto", "/nonexistent/munge.socket.2"), "none");
  EXPECT_EQ(rdzv::ResolveRdzvAuth("", "/etc/passwd"), "none");  // not a socket
}

}  // namespace
}  // namespace ltd

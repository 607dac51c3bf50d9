// etcd's own TLS and authentication, against a real etcd: nodes meet over
// etcds:// with client certificates the test made (openssl), and, with
// etcd's users on, only the user given may write the runs' prefix. A user
// file others can read is refused in one line.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <future>

#include "etcd/etcdserver/etcdserverpb/rpc.grpc.pb.h"
#include "etcd_client.h"
#include "etcd_security.h"
#include "etcd_server.h"
#include "harness.h"
#include "rendezvous.h"

namespace ltd {
namespace {

using namespace std::chrono_literals;
namespace pb = etcdserverpb;

class EtcdSecurityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/ltd-etcd-tls.XXXXXX";
    dir_ = mkdtemp(tmpl);
  }
  void TearDown() override {
    server_.reset();
    std::filesystem::remove_all(dir_);
  }
  std::string Path(const std::string& name) const { return dir_ + "/" + name; }
  void Write(const std::string& name, const std::string& text, mode_t mode) {
    std::ofstream(Path(name)) << text;
    chmod(Path(name).c_str(), mode);
  }
  // A CA, etcd's certificate for 127.0.0.1 and a client's, all signed by it.
  bool MakeCertificates() {
    auto run = [&](std::vector<std::string> argv) {
      test::CmdResult r = test::RunCommand(argv, {}, 30s);
      if (r.exit_code != 0) ADD_FAILURE() << argv[1] << ": " << r.err;
      return r.exit_code == 0;
    };
    const std::vector<std::string> ec = {"-newkey", "ec", "-pkeyopt",
                                         "ec_paramgen_curve:prime256v1", "-nodes"};
    auto req = [&](const std::string& name, const std::string& cn) {
      std::vector<std::string> argv = {"/usr/bin/openssl", "req"};
      argv.insert(argv.end(), ec.begin(), ec.end());
      for (const std::string& a : {std::string("-keyout"), Path(name + ".key"), std::string("-out"),
                                   Path(name + ".csr"), std::string("-subj"), "/CN=" + cn}) {
        argv.push_back(a);
      }
      return run(argv);
    };
    auto sign = [&](const std::string& name, const std::string& ext) {
      Write(name + ".ext", ext, 0644);
      return run({"/usr/bin/openssl", "x509", "-req", "-in", Path(name + ".csr"), "-CA", Path("ca.pem"),
                  "-CAkey", Path("ca.key"), "-CAcreateserial", "-out", Path(name + ".pem"), "-days",
                  "2", "-extfile", Path(name + ".ext")});
    };
    std::vector<std::string> ca = {"/usr/bin/openssl", "req", "-x509"};
    ca.insert(ca.end(), ec.begin(), ec.end());
    for (const std::string& a : {std::string("-keyout"), Path("ca.key"), std::string("-out"),
                                 Path("ca.pem"), std::string("-days"), std::string("2"),
                                 std::string("-subj"), std::string("/CN=ltd-test-ca")}) {
      ca.push_back(a);
    }
    return run(ca) && req("server", "127.0.0.1") &&
           sign("server", "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n") &&
           req("client", "ltd-node") && sign("client", "extendedKeyUsage=clientAuth\n") &&
           chmod(Path("client.key").c_str(), 0600) == 0;
  }
  rdzv::Config Node(int rank, etcd::Security security) {
    rdzv::Config c;
    c.endpoint = server_->endpoint();
    c.security = std::move(security);
    c.run_id = "sec-" + std::to_string(getpid());
    c.nnodes = 2;
    c.node_rank = rank;
    c.host = "host" + std::to_string(rank);
    c.master_addr = "127.0.0.1";
    c.master_port = 29500;
    c.timeout = 10s;
    return c;
  }
  // Both nodes of a run meet; their agreed master port, or the first error.
  absl::StatusOr<int> Meet(const etcd::Security& s) {
    auto one = std::async(std::launch::async, [&] { return rdzv::Rendezvous::Join(Node(1, s)); });
    auto zero = rdzv::Rendezvous::Join(Node(0, s));
    auto r1 = one.get();
    if (!zero.ok()) return zero.status();
    if (!r1.ok()) return r1.status();
    return (*r1)->agreement().master_port;
  }

  std::string dir_;
  std::unique_ptr<test::EtcdServer> server_;
};

TEST_F(EtcdSecurityTest, NodesMeetOverTlsWithClientCertificates) {
  if (access("/usr/bin/openssl", X_OK) != 0) GTEST_SKIP() << "openssl is not installed";
  ASSERT_TRUE(MakeCertificates());
  test::EtcdTls tls{Path("server.pem"), Path("server.key"), Path("ca.pem")};
  server_ = std::make_unique<test::EtcdServer>("127.0.0.1", &tls);
  if (!server_->ok()) GTEST_SKIP() << "etcd cannot start here: " << server_->error();
  bool is_tls = false;
  ASSERT_TRUE(rdzv::ParseRdzvUrl(server_->url(), &is_tls).ok());
  ASSERT_TRUE(is_tls) << server_->url();
  auto sec = rdzv::LoadSecurity({Path("ca.pem"), Path("client.pem"), Path("client.key"), ""}, true);
  ASSERT_TRUE(sec.ok()) << sec.status();
  auto port = Meet(*sec);
  ASSERT_TRUE(port.ok()) << port.status();
  EXPECT_EQ(*port, 29500);
  // Without a client certificate, or in plain text, etcd takes nobody.
  auto no_cert = rdzv::LoadSecurity({Path("ca.pem"), "", "", ""}, true);
  ASSERT_TRUE(no_cert.ok());
  auto c = etcd::Client::Connect(server_->endpoint(), 2s, nullptr, *no_cert);
  if (c.ok()) {
    EXPECT_FALSE((*c)->Put("/ltd/runs/x", "y").ok());
  }
  EXPECT_FALSE(etcd::Client::Connect(server_->endpoint(), 2s).ok());
  // Certificates for a plain etcd:// would be ignored: refused instead.
  auto plain = rdzv::LoadSecurity({Path("ca.pem"), "", "", ""}, false);
  EXPECT_FALSE(plain.ok());
  // A client key others can read is refused.
  chmod(Path("client.key").c_str(), 0644);
  auto open_key =
      rdzv::LoadSecurity({Path("ca.pem"), Path("client.pem"), Path("client.key"), ""}, true);
  ASSERT_FALSE(open_key.ok());
  EXPECT_EQ(open_key.status().message(), "--etcd-key " + Path("client.key") +
                                             " is readable by others (mode 0644); chmod 600 it");
}

TEST_F(EtcdSecurityTest, OnlyTheUserGivenMayWriteTheRunsPrefix) {
  server_ = std::make_unique<test::EtcdServer>();
  if (!server_->ok()) GTEST_SKIP() << "etcd cannot start here: " << server_->error();
  // etcd's users, as an admin sets them up: root, and `ltd` who alone may
  // read and write /ltd/runs/.
  auto channel = grpc::CreateChannel(server_->endpoint(), grpc::InsecureChannelCredentials());
  auto auth = pb::Auth::NewStub(channel);
  auto ok = [&](const grpc::Status& s) {
    EXPECT_TRUE(s.ok()) << s.error_message();
    return s.ok();
  };
  {
    grpc::ClientContext c1, c2, c3, c4, c5, c6, c7, c8;
    pb::AuthRoleAddRequest root_role, ltd_role;
    root_role.set_name("root");
    ltd_role.set_name("ltd");
    pb::AuthRoleAddResponse role_resp;
    ASSERT_TRUE(ok(auth->RoleAdd(&c1, root_role, &role_resp)));
    ASSERT_TRUE(ok(auth->RoleAdd(&c2, ltd_role, &role_resp)));
    pb::AuthUserAddRequest root_user, ltd_user;
    root_user.set_name("root");
    root_user.set_password("rootpw");
    ltd_user.set_name("ltd");
    ltd_user.set_password("s3cret:with:colons");
    pb::AuthUserAddResponse user_resp;
    ASSERT_TRUE(ok(auth->UserAdd(&c3, root_user, &user_resp)));
    ASSERT_TRUE(ok(auth->UserAdd(&c4, ltd_user, &user_resp)));
    pb::AuthUserGrantRoleRequest g1, g2;
    g1.set_user("root");
    g1.set_role("root");
    g2.set_user("ltd");
    g2.set_role("ltd");
    pb::AuthUserGrantRoleResponse grant_resp;
    ASSERT_TRUE(ok(auth->UserGrantRole(&c5, g1, &grant_resp)));
    ASSERT_TRUE(ok(auth->UserGrantRole(&c6, g2, &grant_resp)));
    pb::AuthRoleGrantPermissionRequest perm;
    perm.set_name("ltd");
    perm.mutable_perm()->set_permtype(authpb::Permission::READWRITE);
    perm.mutable_perm()->set_key("/ltd/runs/");
    perm.mutable_perm()->set_range_end(etcd::PrefixEnd("/ltd/runs/"));
    pb::AuthRoleGrantPermissionResponse perm_resp;
    ASSERT_TRUE(ok(auth->RoleGrantPermission(&c7, perm, &perm_resp)));
    pb::AuthEnableRequest enable;
    pb::AuthEnableResponse enable_resp;
    ASSERT_TRUE(ok(auth->AuthEnable(&c8, enable, &enable_resp)));
  }
  // Anyone else: no write.
  auto anyone = etcd::Client::Connect(server_->endpoint(), 5s);
  ASSERT_TRUE(anyone.ok());
  EXPECT_FALSE((*anyone)->Put("/ltd/runs/r/attempts/0/report/1", "forged").ok());
  // The user file, root's (the test's) and 0600: the nodes meet.
  Write("etcd-user", "ltd:s3cret:with:colons\n", 0600);
  auto sec = rdzv::LoadSecurity({"", "", "", Path("etcd-user")}, false);
  ASSERT_TRUE(sec.ok()) << sec.status();
  EXPECT_EQ(sec->user, "ltd");
  EXPECT_EQ(sec->password, "s3cret:with:colons");
  auto port = Meet(*sec);
  ASSERT_TRUE(port.ok()) << port.status();
  // A wrong password: one line, at connect.
  Write("wrong", "ltd:nope\n", 0600);
  auto wrong = rdzv::LoadSecurity({"", "", "", Path("wrong")}, false);
  ASSERT_TRUE(wrong.ok());
  auto refused = etcd::Client::Connect(server_->endpoint(), 5s, nullptr, *wrong);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("refused the user 'ltd'"), std::string::npos)
      << refused.status();
  // A user file others can read: refused, in one line.
  chmod(Path("etcd-user").c_str(), 0644);
  auto open = rdzv::LoadSecurity({"", "", "", Path("etcd-user")}, false);
  ASSERT_FALSE(open.ok());
  EXPECT_EQ(open.status().message(), "--etcd-auth-file " + Path("etcd-user") +
                                         " is readable by others (mode 0644); chmod 600 it");
}

}  // namespace
}  // namespace ltd

// S3 settings as every AWS tool reads them: the standard variables
// (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, AWS_REGION,
// AWS_ENDPOINT_URL, AWS_PROFILE) and ~/.aws/credentials and ~/.aws/config,
// with the command line's overrides on top.
#pragma once

#include <optional>
#include <string>

namespace ptwm::remote {

// What -o s3_endpoint=, region=, profile= (or the tool's --s3-endpoint,
// --region, --profile) say; unset fields fall through to the environment.
struct S3Overrides {
    std::optional<std::string> endpoint, region, profile;
};

struct S3Config {
    std::string endpoint;  // "http://127.0.0.1:8333"; empty: AWS itself
    std::string region = "us-east-1";
    // Path-style URLs (ENDPOINT/BUCKET/KEY), as self-hosted servers need; on
    // by default whenever an endpoint is given, or by addressing_style = path.
    bool path_style = false;
    std::string access_key, secret_key, session_token;  // empty: unsigned requests
    std::string profile = "default";
    std::string credentials_from;  // "environment", "profile NAME in FILE" or "none", for messages

    // Resolution: overrides, then the environment, then the profile's files.
    // Credentials: an explicit profile override wins over the variables
    // (as `aws --profile` does); otherwise the variables, then the profile.
    static S3Config load(const S3Overrides& overrides);
    // The https URL of an object (key not yet escaped).
    std::string object_url(const std::string& bucket, const std::string& key) const;
    bool signs() const { return !access_key.empty(); }
};

}  // namespace ptwm::remote

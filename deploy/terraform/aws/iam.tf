data "aws_iam_policy_document" "ec2_assume" {
  statement {
    actions = ["sts:AssumeRole"]
    principals {
      type        = "Service"
      identifiers = ["ec2.amazonaws.com"]
    }
  }
}

data "aws_iam_policy_document" "scheduler" {
  statement {
    sid       = "CheckpointObjects"
    actions   = ["s3:GetObject", "s3:PutObject", "s3:DeleteObject", "s3:AbortMultipartUpload"]
    resources = ["${aws_s3_bucket.checkpoints.arn}/*"]
  }
  statement {
    sid       = "CheckpointBucket"
    actions   = ["s3:ListBucket", "s3:GetBucketLocation"]
    resources = [aws_s3_bucket.checkpoints.arn]
  }
  statement {
    sid       = "DatabasePassword"
    actions   = ["ssm:GetParameter"]
    resources = [aws_ssm_parameter.db_password.arn]
  }
  statement {
    sid       = "ClusterSecrets"
    actions   = ["ssm:GetParameter"]
    resources = [aws_ssm_parameter.cluster_secret.arn, aws_ssm_parameter.admin_password.arn]
  }
  statement {
    sid       = "PublishTheClusterCA"
    actions   = ["ssm:GetParameter", "ssm:PutParameter"]
    resources = [aws_ssm_parameter.tls_ca.arn]
  }
}

resource "aws_iam_role" "scheduler" {
  name               = "${var.name}-scheduler"
  assume_role_policy = data.aws_iam_policy_document.ec2_assume.json
  tags               = local.tags
}

resource "aws_iam_role_policy" "scheduler" {
  name   = "${var.name}-scheduler"
  role   = aws_iam_role.scheduler.id
  policy = data.aws_iam_policy_document.scheduler.json
}

resource "aws_iam_instance_profile" "scheduler" {
  name = "${var.name}-scheduler"
  role = aws_iam_role.scheduler.name
}

# Agents read the cluster secret and the CA certificate at boot; checkpoints go through the
# checkpoint store. Operators may attach more, e.g. read access to datasets or SSM Session Manager.
resource "aws_iam_role" "agent" {
  name               = "${var.name}-agent"
  assume_role_policy = data.aws_iam_policy_document.ec2_assume.json
  tags               = local.tags
}

data "aws_iam_policy_document" "agent" {
  statement {
    sid       = "ClusterSecretAndCA"
    actions   = ["ssm:GetParameter"]
    resources = [aws_ssm_parameter.cluster_secret.arn, aws_ssm_parameter.tls_ca.arn]
  }
}

resource "aws_iam_role_policy" "agent" {
  name   = "${var.name}-agent"
  role   = aws_iam_role.agent.id
  policy = data.aws_iam_policy_document.agent.json
}

resource "aws_iam_instance_profile" "agent" {
  name = "${var.name}-agent"
  role = aws_iam_role.agent.name
}

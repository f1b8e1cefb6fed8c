output "scheduler_address" {
  description = "HOST:PORT for `pedl --master` / PEDL_MASTER (the scheduler's Elastic IP)."
  value       = "${aws_eip.scheduler.public_ip}:8080"
}

output "scheduler_private_address" {
  description = "The scheduler's address inside the VPC (what agents use)."
  value       = "${aws_instance.scheduler.private_ip}:8080"
}

output "checkpoint_store_address" {
  description = "The checkpoint store's address handed to harnesses and CLIs (inside the VPC)."
  value       = "${aws_instance.scheduler.private_ip}:8090"
}

output "webui_url" {
  description = "The web UI (plain HTTP; reachable from webui_cidrs only, else through an SSH tunnel)."
  value       = "http://${aws_eip.scheduler.public_ip}:8100/"
}

output "metrics_url" {
  description = "The scheduler's Prometheus endpoint (reachable from metrics_cidrs only)."
  value       = "http://${aws_eip.scheduler.public_ip}:9464/metrics"
}

output "checkpoint_bucket" {
  description = "S3 bucket holding the checkpoints."
  value       = aws_s3_bucket.checkpoints.bucket
}

output "database_endpoint" {
  description = "RDS PostgreSQL host:port (reachable from the scheduler only)."
  value       = aws_db_instance.this.endpoint
}

output "agent_autoscaling_group" {
  description = "Name of the agents' autoscaling group (scale it with `aws autoscaling set-desired-capacity`)."
  value       = aws_autoscaling_group.agents.name
}

output "admin_password_parameter" {
  description = "SSM parameter holding the first admin's password (aws ssm get-parameter --with-decryption --name ...)."
  value       = aws_ssm_parameter.admin_password.name
}

output "tls_ca_parameter" {
  description = "SSM parameter the scheduler writes the cluster's CA certificate to at first boot (for PEDL_TLS_CA)."
  value       = aws_ssm_parameter.tls_ca.name
}

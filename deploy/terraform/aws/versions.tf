terraform {
  required_version = ">= 1.11" # ephemeral values and write-only arguments (secrets.tf)
  required_providers {
    aws = {
      source  = "hashicorp/aws"
      version = ">= 5.100, < 7.0"
    }
  }
}
